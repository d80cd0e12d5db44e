// One run of the transcript: its messages, then a footer with its state
// (working, waiting, done, stopped, failed, aborted and why), the
// "recovered" note, Retry for a last run that failed or was aborted, and
// the form that answers a run waiting for input.

import type { JSONValue, Message, Run, TetherClient } from '@tether/client';
import { TetherError, isTerminalRunStatus } from '@tether/client';
import { h, icon, reconcile, setData, setText } from './dom.js';
import { errorText, requestPrompt, runStatusText } from './format.js';
import { MessageView } from './message.js';

/** What a run's view needs from the page. */
export interface RunHost {
  client: TetherClient;
  /** Called with errors that need the token prompt (401/403). */
  onAuthError(err: TetherError): void;
  /** Focuses the message box (an answered form is about to go). */
  focusComposer(): void;
  /** Sends a failed or aborted run's input again, as a new run. */
  retry(run: Run): void;
}

/** The view of one run; the message views are kept by id across updates. */
export class RunView {
  readonly el: HTMLElement;
  private readonly list = h('div', { class: 'run-messages' });
  private readonly statusText = h('span', { class: 'run-status-text' });
  private readonly statusIcon = h('span', { class: 'run-status-icon' });
  private readonly status = h('div', { class: 'run-status', testid: 'run-status', attrs: { role: 'status' } }, this.statusIcon, this.statusText);
  private readonly note = h(
    'div',
    { class: 'recovered-note', testid: 'recovered-note', attrs: { title: 'The live stream dropped; the end of this run was fetched from the server.' } },
    icon('refresh'),
    'Stream dropped — recovered',
  );
  /** Retry, on the last run when it failed or was aborted: its input again, as a new run. */
  private readonly retryBtn = h(
    'button',
    { class: 'btn ghost run-retry', testid: 'run-retry', attrs: { type: 'button', title: 'Send this message again, as a new run, with the options as set now' } },
    icon('refresh'),
    'Retry',
  );
  private readonly slot = h('div', { class: 'run-request' });
  private readonly messages = new Map<string, MessageView>();
  private form: InputForm | undefined;
  private last: Run | undefined;

  constructor(
    readonly id: string,
    private readonly host: RunHost,
  ) {
    this.note.hidden = true;
    this.retryBtn.hidden = true;
    this.retryBtn.addEventListener('click', () => {
      if (this.last) host.retry(this.last);
    });
    this.el = h(
      'section',
      { class: 'run', testid: 'run', attrs: { 'data-run-id': id } },
      this.list,
      this.slot,
      h('div', { class: 'run-foot' }, this.status, this.note, this.retryBtn),
    );
  }

  /** `retry`: whether to offer Retry (the thread's last run, failed or aborted, and nothing on its way). */
  update(run: Run, messages: readonly Message[], recoveredRun: boolean, recoveredMessages: ReadonlySet<string>, retry = false): void {
    const nodes: Node[] = [];
    for (const m of messages) {
      let v = this.messages.get(m.id);
      if (!v) {
        v = new MessageView(m.id, m.role);
        this.messages.set(m.id, v);
      }
      // One note per run: on the run's foot when its end was recovered, else on each recovered message.
      v.update(m, !recoveredRun && recoveredMessages.has(m.id));
      nodes.push(v.el);
    }
    reconcile(this.list, nodes);
    this.note.hidden = !recoveredRun;
    this.retryBtn.hidden = !(retry && (run.status === 'error' || run.status === 'aborted'));
    if (run === this.last) return;
    this.last = run;

    setData(this.el, 'status', run.status);
    setData(this.status, 'status', run.status);
    const tone =
      run.status === 'error' || run.status === 'aborted' ? 'bad' : run.status === 'waiting' ? 'warn' : isTerminalRunStatus(run.status) ? 'quiet' : 'busy';
    setData(this.status, 'tone', tone);
    setText(this.statusText, runStatusText(run));
    this.statusIcon.replaceChildren(tone === 'busy' ? h('span', { class: 'spinner' }) : tone === 'bad' || tone === 'warn' ? icon('alert') : '');
    this.status.title = run.error ? `${run.error.code}: ${run.error.message}` : '';

    const rq = run.status === 'waiting' && !run.cancel_requested_at ? run.request : undefined;
    if (!rq) {
      this.form = undefined;
      this.slot.replaceChildren();
    } else if (this.form?.requestId !== rq.id) {
      this.form = new InputForm(run.id, rq.id, rq.kind, requestPrompt(rq.payload), this.host);
      this.slot.replaceChildren(this.form.el);
      this.form.focus();
    }
  }
}

/**
 * The form shown while a run waits for a person (POST /v1/runs/{rid}/input):
 * a text answer; or, for an approval (kind "approval"), Approve and Deny,
 * with the reason for a denial typed in the box. Enter there denies: a
 * person typing a reason means no.
 */
class InputForm {
  readonly el: HTMLFormElement;
  private readonly input: HTMLInputElement;
  private readonly buttons: HTMLButtonElement[];
  private readonly error = h('div', { class: 'form-error', testid: 'input-error', attrs: { role: 'alert' } });

  constructor(
    private readonly runId: string,
    readonly requestId: string,
    kind: string,
    prompt: string,
    private readonly host: RunHost,
  ) {
    const approval = kind === 'approval';
    this.input = h('input', {
      class: 'field',
      testid: 'input-value',
      attrs: approval
        ? { type: 'text', placeholder: 'Why not? (optional)', autocomplete: 'off', 'aria-label': 'Reason to deny' }
        : { type: 'text', placeholder: 'Type your answer…', autocomplete: 'off', 'aria-label': 'Your answer', required: true },
    });
    // The submit button: Deny for an approval, else Send answer.
    const main = approval
      ? h('button', { class: 'btn', testid: 'input-deny', attrs: { type: 'submit' } }, 'Deny')
      : h('button', { class: 'btn primary', testid: 'input-submit', attrs: { type: 'submit' } }, 'Send answer');
    this.buttons = [main];
    if (approval) {
      const approve = h('button', { class: 'btn primary', testid: 'input-approve', attrs: { type: 'button' } }, 'Approve');
      approve.addEventListener('click', () => void this.send(true, approve));
      this.buttons.unshift(approve);
    }
    this.error.hidden = true;
    const submit = (): void => {
      const value = this.input.value.trim();
      if (approval) void this.send(value ? { approved: false, message: value } : false, main);
      else if (value) void this.send(value, main);
    };
    this.el = h(
      'form',
      { class: 'input-form', testid: 'input-form', attrs: { 'data-kind': kind }, on: { submit: (e) => (e.preventDefault(), submit()) } },
      h('div', { class: 'input-prompt', testid: 'input-prompt' }, icon('alert'), h('span', {}, prompt)),
      h('div', { class: 'input-row' }, this.input, ...this.buttons),
      this.error,
    );
  }

  focus(): void {
    // Not on touch screens, where focusing opens the keyboard over the page.
    if (matchMedia('(hover: hover)').matches) requestAnimationFrame(() => this.input.focus({ preventScroll: true }));
  }

  private async send(value: JSONValue, button: HTMLButtonElement): Promise<void> {
    // The form is disabled now and goes once the run goes on: the focus
    // moves to the message box first, or it would drop to the top of the
    // page for someone answering from the keyboard.
    const had = this.el.contains(document.activeElement);
    if (had) this.host.focusComposer();
    this.disable(true);
    this.error.hidden = true;
    try {
      await this.host.client.submitInput(this.runId, this.requestId, value);
      setText(button, 'Sent');
    } catch (err) {
      this.disable(false);
      if (had) this.input.focus({ preventScroll: true }); // to correct the answer
      if (err instanceof TetherError && (err.status === 401 || err.status === 403)) this.host.onAuthError(err);
      this.error.hidden = false;
      setText(this.error, errorText(err));
    }
  }

  private disable(off: boolean): void {
    this.input.disabled = off;
    for (const b of this.buttons) b.disabled = off;
  }
}
