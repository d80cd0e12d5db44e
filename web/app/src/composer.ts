// The composer: a message box, Send (or Stop while a run is active), and an
// "Options" disclosure for the agent and the demo agent's settings.

import { h, icon, setText } from './dom.js';
import { errorText, type RunOptions } from './format.js';

/** What the composer says when a message is sent while a run is active. */
export const BUSY = 'A run is in progress: wait for it to end, or stop it.';

/** What it says when that run waits for the person's answer (its form is above). */
export const ANSWER = 'The agent is waiting for your answer: use the form above, or stop the run.';

/** What the composer asks of the page. */
export interface ComposerHost {
  /** Sends a message with the options; rejects with an error to show. */
  send(text: string, options: RunOptions): Promise<void>;
  /** Stops the active run. */
  stop(): Promise<void>;
}

/** The message box at the bottom of the chat pane. */
export class Composer {
  readonly el: HTMLFormElement;
  private readonly text = h('textarea', {
    class: 'composer-input',
    testid: 'composer-input',
    attrs: { rows: 1, placeholder: 'Message the agent…', 'aria-label': 'Message', enterkeyhint: 'send' },
  });
  private readonly sendBtn = h('button', { class: 'btn primary round', testid: 'send', attrs: { type: 'submit', 'aria-label': 'Send', title: 'Send (Enter)' } }, icon('send'));
  private readonly stopBtn = h('button', { class: 'btn danger round', testid: 'stop', attrs: { type: 'button', 'aria-label': 'Stop', title: 'Stop the run' } }, icon('stop'));
  private readonly error = h('div', { class: 'form-error', testid: 'composer-error', attrs: { role: 'alert' } });
  private readonly agent = h('input', { class: 'field', testid: 'opt-agent', attrs: { type: 'text', placeholder: 'server default', autocomplete: 'off', spellcheck: 'false' } });
  private readonly tokens = h('input', { class: 'field', testid: 'opt-tokens', attrs: { type: 'number', min: 0, max: 100000, placeholder: '80', inputmode: 'numeric' } });
  private readonly delay = h('input', { class: 'field', testid: 'opt-delay', attrs: { type: 'number', min: 0, max: 60000, placeholder: '30', inputmode: 'numeric' } });
  private readonly reasoning = checkbox('opt-reasoning');
  private readonly tool = checkbox('opt-tool');
  private readonly approve = checkbox('opt-approve');
  private readonly ask = checkbox('opt-ask');
  private readonly fail = checkbox('opt-fail');
  private readonly summary = h('span', { class: 'options-summary', testid: 'options-summary' });
  private sending = false;
  private active = false;
  private waiting = false;
  private optionsEl!: HTMLDetailsElement;

  constructor(
    private readonly host: ComposerHost,
    initial: RunOptions,
  ) {
    this.agent.value = initial.agent;
    this.tokens.value = initial.tokens === undefined ? '' : String(initial.tokens);
    this.delay.value = initial.delayMs === undefined ? '' : String(initial.delayMs);
    this.reasoning.checked = initial.reasoning;
    this.tool.checked = initial.tool;
    this.approve.checked = initial.approve;
    this.ask.checked = initial.ask;
    this.fail.checked = initial.fail;
    this.error.hidden = true;
    this.stopBtn.hidden = true;

    const options = (this.optionsEl = h(
      'details',
      { class: 'options', testid: 'options' },
      h('summary', {}, icon('sliders'), h('span', {}, 'Options'), this.summary),
      h(
        'div',
        { class: 'options-grid' },
        labelled('Agent', this.agent),
        labelled('Words', this.tokens),
        labelled('Delay (ms)', this.delay),
        h(
          'div',
          { class: 'checks' },
          checkLabel(this.reasoning, 'Reasoning'),
          checkLabel(this.tool, 'Tool call'),
          checkLabel(this.approve, 'Ask to approve the tool call'),
          checkLabel(this.ask, 'Ask for input'),
          checkLabel(this.fail, 'Fail halfway'),
        ),
        h('p', { class: 'options-hint' }, 'Words, delay and the checkboxes set the demo agent’s run (metadata.demo).'),
      ),
    ));
    for (const el of [this.agent, this.tokens, this.delay, this.reasoning, this.tool, this.approve, this.ask, this.fail]) {
      el.addEventListener('input', () => this.updateSummary());
    }
    this.updateSummary();

    this.text.addEventListener('input', () => this.autosize());
    this.text.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        this.el.requestSubmit();
      }
    });
    this.stopBtn.addEventListener('click', () => void this.onStop());
    this.el = h(
      'form',
      { class: 'composer', testid: 'composer', on: { submit: (e) => (e.preventDefault(), void this.onSend()) } },
      h('div', { class: 'composer-box' }, this.text, this.sendBtn, this.stopBtn),
      h('div', { class: 'composer-meta' }, options, this.error),
    );
  }

  /** Fills the box and sends (a suggestion chip). */
  sendText(text: string): void {
    this.text.value = text;
    this.el.requestSubmit();
  }

  /**
   * Sends a run's input again (a run's Retry) as a message sent from the
   * box would be, but without the box: what is typed there stays, and an
   * error is said under it (Retry stays, to try again).
   */
  resend(send: () => Promise<void>): void {
    if (this.sending) return;
    if (this.active) {
      this.showError(this.waiting ? ANSWER : BUSY);
      return;
    }
    void this.deliver(send);
  }

  /** Focuses the message box (not on touch screens, where it opens the keyboard). */
  focus(): void {
    if (matchMedia('(hover: hover)').matches) this.text.focus({ preventScroll: true });
  }

  /**
   * Whether a run is active (Send becomes Stop), whether a stop was
   * already asked for, and whether the run waits for an answer.
   */
  setActive(active: boolean, stopping: boolean, waiting = false): void {
    const was = { active: this.active, waiting: this.waiting };
    this.active = active;
    this.waiting = active && waiting;
    // What was said of a run is unsaid when that run ends (or stops
    // waiting), not at every update that finds none: a 409 run_active for
    // a run this page has not heard of yet is said while the view still
    // shows no run, and must stay until that run shows and ends.
    const said = this.error.textContent;
    if ((said === BUSY && was.active && !active) || (said === ANSWER && was.waiting && !this.waiting)) this.showError(undefined);
    if (!active || stopping) this.leaveStop();
    this.sendBtn.hidden = active;
    this.stopBtn.hidden = !active;
    this.stopBtn.disabled = stopping;
    this.stopBtn.title = stopping ? 'Stopping…' : 'Stop the run';
  }

  /** The options as set now. */
  options(): RunOptions {
    const int = (el: HTMLInputElement) => {
      const n = el.valueAsNumber;
      return el.value.trim() === '' || !Number.isInteger(n) || n < 0 ? undefined : n;
    };
    return {
      agent: this.agent.value.trim(),
      tokens: int(this.tokens),
      delayMs: int(this.delay),
      reasoning: this.reasoning.checked,
      tool: this.tool.checked,
      approve: this.approve.checked,
      ask: this.ask.checked,
      fail: this.fail.checked,
    };
  }

  private updateSummary(): void {
    const o = this.options();
    const bits: string[] = [];
    if (o.agent) bits.push(o.agent);
    if (o.tokens !== undefined) bits.push(`${o.tokens} words`);
    if (o.delayMs !== undefined) bits.push(`${o.delayMs} ms`);
    if (o.approve) bits.push('asks approval');
    if (o.ask) bits.push('asks');
    if (o.fail) bits.push('fails');
    if (!o.reasoning) bits.push('no reasoning');
    if (!o.tool) bits.push('no tool');
    setText(this.summary, bits.join(' · '));
  }

  private autosize(): void {
    this.text.style.height = 'auto';
    this.text.style.height = `${Math.min(this.text.scrollHeight, 200)}px`;
  }

  private showError(msg: string | undefined): void {
    this.error.hidden = !msg;
    setText(this.error, msg ?? '');
  }

  private async onSend(): Promise<void> {
    const text = this.text.value.trim();
    if (!text || this.sending) return;
    if (this.active) {
      // Enter while Send is Stop: the message waits in the box, and the page says why.
      this.showError(this.waiting ? ANSWER : BUSY);
      return;
    }
    // The message leaves the box at once (the page shows it on its way), so
    // that on a slow network the box is free for the next one: what is
    // typed meanwhile stays.
    this.text.value = '';
    this.autosize();
    const options = this.options();
    await this.deliver(
      async () => {
        await this.host.send(text, options);
        // The options stay as set, for the next message; the panel closes
        // so that the answer has the room.
        this.optionsEl.open = false;
      },
      () => {
        // Not sent: back in the box, before anything typed since.
        const typed = this.text.value;
        this.text.value = typed.trim() ? `${text}\n${typed}` : text;
        this.autosize();
      },
    );
  }

  /** Runs a send with Send disabled meanwhile; a failure is said under the box, after `failed`. */
  private async deliver(send: () => Promise<void>, failed?: () => void): Promise<void> {
    this.sending = true;
    this.sendBtn.disabled = true;
    this.showError(undefined);
    try {
      await send();
    } catch (err) {
      failed?.();
      this.showError(errorText(err));
    } finally {
      this.sending = false;
      this.sendBtn.disabled = false;
      // A click on Send or a suggestion leaves the focus on a button that
      // hides as the run starts: back to the box, so the next words go there.
      const at = document.activeElement;
      if (!at || at === document.body || this.el.contains(at)) this.focus();
    }
  }

  /**
   * Moves the focus from Stop to the message box before Stop is disabled
   * or hidden: a focused button that is disabled or hidden drops the focus
   * to the top of the page, and someone who pressed Stop from the keyboard
   * would have to Tab back from there.
   */
  private leaveStop(): void {
    if (document.activeElement === this.stopBtn) this.focus();
  }

  private async onStop(): Promise<void> {
    this.leaveStop();
    this.stopBtn.disabled = true;
    try {
      await this.host.stop();
    } catch (err) {
      this.stopBtn.disabled = false;
      this.showError(errorText(err));
    }
  }
}

function checkbox(testid: string): HTMLInputElement {
  return h('input', { testid, attrs: { type: 'checkbox' } });
}

function checkLabel(box: HTMLInputElement, text: string): HTMLElement {
  return h('label', { class: 'check' }, box, h('span', {}, text));
}

function labelled(text: string, field: HTMLElement): HTMLElement {
  return h('label', { class: 'labelled' }, h('span', {}, text), field);
}
