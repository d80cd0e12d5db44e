// AG-UI against a real `tether serve`: the unmodified HttpAgent of
// @ag-ui/client 1.0.0 runs the demo agent through POST /v1/ag-ui/demo, and
// TetherAgent brings back a run whose stream was cut.
import { HttpAgent, type Message } from '@ag-ui/client';
import { describe, expect, it } from 'vitest';
import { TetherAgent } from '../../src/ag-ui.js';
import type { Timers } from '../../src/timing.js';
import { threadName, until, url } from './helpers.js';
import { Wire } from './wire.js';

interface FinalAnswer {
  content: string;
  complete: boolean;
  run_id: string;
}

async function finalAnswer(tid: string): Promise<FinalAnswer> {
  return (await (await fetch(`${url()}/v1/threads/${tid}/final-answer`)).json()) as FinalAnswer;
}

const lastAssistant = (msgs: Message[]) => [...msgs].reverse().find((m) => m.role === 'assistant') as { content?: string; toolCalls?: unknown[] } | undefined;
const demo = (opts: Record<string, unknown>) => ({ forwardedProps: { demo: opts } });

describe('AG-UI (real server)', () => {
  it('HttpAgent runs the demo agent: reasoning, a tool call and its result, the answer equal to the final answer', async () => {
    const tid = threadName('agui');
    const agent = new HttpAgent({ url: `${url()}/v1/ag-ui/demo`, threadId: tid });
    agent.addMessage({ id: `u-${tid}`, role: 'user', content: 'What is a durable log?' });
    const types = new Set<string>();
    const res = await agent.runAgent(demo({ tokens: 30, delay_ms: 2 }), { onEvent: ({ event }) => void types.add(event.type) });
    const fa = await finalAnswer(tid);
    expect(fa.complete).toBe(true);
    expect(lastAssistant(agent.messages)?.content).toBe(fa.content);
    expect(fa.content.split(' ')).toHaveLength(30);
    for (const t of ['RUN_STARTED', 'REASONING_MESSAGE_CONTENT', 'TOOL_CALL_ARGS', 'TOOL_CALL_RESULT', 'TEXT_MESSAGE_CONTENT', 'RUN_FINISHED']) expect(types).toContain(t);
    const roles = res.newMessages.map((m) => m.role);
    expect(roles).toEqual(['reasoning', 'assistant', 'tool']);
    const asst = lastAssistant(agent.messages)!;
    expect(asst.toolCalls).toMatchObject([{ function: { name: 'search', arguments: expect.stringContaining('durable log') } }]);
    expect(agent.messages.find((m) => m.role === 'tool')?.content).toContain('Overview of');
  });

  it('an interrupt and its resume[] answer round-trip on the same Tether run', async () => {
    const tid = threadName('agui-ask');
    const agent = new HttpAgent({ url: `${url()}/v1/ag-ui/demo`, threadId: tid });
    agent.addMessage({ id: `u-${tid}`, role: 'user', content: 'Summarize the notes' });
    let outcome = '';
    await agent.runAgent(demo({ tokens: 12, delay_ms: 1, ask: true }), { onRunFinishedEvent: (p) => void (outcome = p.outcome) });
    expect(outcome).toBe('interrupt');
    expect(agent.pendingInterrupts).toMatchObject([{ reason: 'input', message: 'Which detail should the answer focus on?' }]);
    const id = agent.pendingInterrupts[0]!.id;
    await agent.runAgent({ resume: [{ interruptId: id, status: 'resolved', payload: 'speed' }] }, { onRunFinishedEvent: (p) => void (outcome = p.outcome) });
    expect(outcome).toBe('success');
    expect(agent.pendingInterrupts).toEqual([]);
    const fa = await finalAnswer(tid);
    expect(fa.content.startsWith('You asked me to focus on “speed”.')).toBe(true);
    expect(lastAssistant(agent.messages)?.content).toBe(fa.content);
    const thread = (await (await fetch(`${url()}/v1/threads/${tid}`)).json()) as { runs: unknown[] };
    expect(thread.runs).toHaveLength(1);
  });

  it('HttpAgent cut mid-run fails; TetherAgent.connectAgent() then brings the whole message, once, through verifyEvents', async () => {
    const tid = threadName('agui-cut');
    const wire = new Wire();
    wire.on((m, u) => m === 'POST' && u.includes('/v1/ag-ui/'), () => ({ kind: 'cut', after: 6000 }));
    const cut = new HttpAgent({ url: `${url()}/v1/ag-ui/demo`, threadId: tid, fetch: wire.fetch });
    cut.addMessage({ id: `u-${tid}`, role: 'user', content: 'Tell me a long story' });
    await expect(cut.runAgent(demo({ tokens: 300, delay_ms: 4 }))).rejects.toThrow();
    const partial = lastAssistant(cut.messages)?.content ?? '';
    expect((await finalAnswer(tid)).complete).toBe(false); // cut mid-run

    // The same client's state, joined by a TetherAgent (as an app would
    // swap the class).
    const agent = new TetherAgent({ url: `${url()}/v1/ag-ui/demo`, threadId: tid, initialMessages: cut.messages });
    const texts: string[] = [];
    await agent.connectAgent({}, { onTextMessageContentEvent: ({ event }) => void texts.push(event.delta) });
    const fa = await finalAnswer(tid);
    expect(fa.complete).toBe(true);
    const got = lastAssistant(agent.messages)?.content;
    expect(got).toBe(fa.content);
    expect(got!.startsWith(partial)).toBe(true);
    expect(agent.messages.filter((m) => m.role === 'assistant')).toHaveLength(1);
    expect(texts.join('').length).toBeLessThanOrEqual(fa.content.length); // nothing sent twice
  });

  it('TetherAgent.runAgent survives repeated cuts and ends with the final answer', async () => {
    const tid = threadName('agui-resume');
    const wire = new Wire();
    wire.on((m, u) => m === 'POST' && u.includes('/v1/ag-ui/'), () => ({ kind: 'cut', after: 3000 }));
    wire.on((m, u) => m === 'GET' && u.includes('/v1/ag-ui/'), (n) => (n < 4 ? { kind: 'cut', after: 4000 } : { kind: 'pass' }));
    const agent = new TetherAgent({ url: `${url()}/v1/ag-ui/demo`, threadId: tid, fetch: wire.fetch, backoff: { initialMs: 20, maxMs: 100 } });
    agent.addMessage({ id: `u-${tid}`, role: 'user', content: 'Tell me more' });
    let finished = 0;
    await agent.runAgent(demo({ tokens: 200, delay_ms: 3 }), { onRunFinishedEvent: () => void finished++ });
    const fa = await finalAnswer(tid);
    expect(fa.complete).toBe(true);
    expect(finished).toBe(1);
    expect(lastAssistant(agent.messages)?.content).toBe(fa.content);
    expect(wire.log.filter((l) => l.startsWith('GET') && l.includes('cut')).length).toBeGreaterThanOrEqual(3);
  });

  it('TetherAgent.cancelRun() stops the run on the server (a stop button); abortRun() would only stop following it', async () => {
    const tid = threadName('agui-cancel');
    const agent = new TetherAgent({ url: `${url()}/v1/ag-ui/demo`, threadId: tid });
    expect(await agent.cancelRun()).toBe(false); // no run yet
    agent.addMessage({ id: `u-${tid}`, role: 'user', content: 'Tell me more' });
    let outcome = '';
    const run = agent.runAgent(demo({ tokens: 2000, delay_ms: 5 }), { onRunFinishedEvent: (p) => void (outcome = p.outcome) });
    await until(() => agent.tetherRunId !== undefined, 15_000, 'the run to start');
    expect(await agent.cancelRun()).toBe(true);
    await run;
    expect(outcome).toBe('cancelled');
    const got = (await (await fetch(`${url()}/v1/runs/${agent.tetherRunId}`)).json()) as { run: { status: string } };
    expect(got.run.status).toBe('cancelled');
  });

  it('TetherAgent: abortRun() while it waits to join again ends the run, and no join is sent', async () => {
    const tid = threadName('agui-abort');
    const wire = new Wire();
    wire.on((m, u) => m === 'POST' && u.includes('/v1/ag-ui/'), () => ({ kind: 'cut', after: 3000 }));
    // Timers that never fire: the backoff wait lasts until something ends it.
    const waiting: (() => void)[] = [];
    const timers: Timers = { setTimeout: (fn) => (waiting.push(fn), waiting.length), clearTimeout: () => {}, now: () => Date.now(), random: () => 0 };
    const agent = new TetherAgent({ url: `${url()}/v1/ag-ui/demo`, threadId: tid, fetch: wire.fetch, timers });
    agent.addMessage({ id: `u-${tid}`, role: 'user', content: 'Tell me more' });
    let settled = false;
    const run = agent.runAgent({ forwardedProps: { demo: { tokens: 200, delay_ms: 3 } } }).finally(() => (settled = true));
    await until(() => waiting.length > 0, 15_000, 'the backoff wait after the cut');
    agent.abortRun();
    await until(() => settled, 5_000, 'runAgent to settle after abortRun');
    await run;
    expect(wire.log.filter((l) => l.startsWith('GET'))).toEqual([]);
  });
});

describe('AG-UI stop button (real server, a worker)', () => {
  it('TetherAgent.cancelRun() right after sending stops the new run, not the one it followed before', async () => {
    const tid = threadName('agui-stop-early');
    const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
      fetch(`${url()}${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(body) });
    expect((await post('/v1/workers/claim', { worker_id: 'w1', agents: ['stoppable'], wait_ms: 0 })).status).toBe(204);
    const agent = new TetherAgent({ url: `${url()}/v1/ag-ui/stoppable`, threadId: tid });
    // A first run, answered by the worker: the agent follows it to its end.
    agent.addMessage({ id: `u1-${tid}`, role: 'user', content: 'hello' });
    const first = agent.runAgent();
    const claim = (await (await post('/v1/workers/claim', { worker_id: 'w1', agents: ['stoppable'], wait_ms: 10_000 })).json()) as { run: { id: string }; lease: { token: string } };
    expect((await post(`/v1/runs/${claim.run.id}/events`, [{ type: 'run.finished', status: 'done' }], { 'Tether-Lease': claim.lease.token })).status).toBe(200);
    await first;
    expect(agent.tetherRunId).toBe(claim.run.id);
    // The next one waits for a worker (a busy queue, a slow agent): no
    // event of it has come when the person presses stop.
    agent.addMessage({ id: `u2-${tid}`, role: 'user', content: 'a long one' });
    let outcome = '';
    const second = agent.runAgent({}, { onRunFinishedEvent: (p) => void (outcome = p.outcome) });
    await until(async () => {
      const t = (await (await fetch(`${url()}/v1/threads/${tid}`)).json()) as { runs: unknown[] };
      return t.runs.length === 2;
    }, 15_000, 'the second run');
    expect(await agent.cancelRun()).toBe(true);
    const runs = async () => ((await (await fetch(`${url()}/v1/threads/${tid}`)).json()) as { runs: { id: string; status: string }[] }).runs;
    await until(async () => (await runs())[1]!.status !== 'pending', 10_000, 'the second run to end');
    await second;
    expect(outcome).toBe('cancelled');
    const t = { runs: await runs() };
    expect(t.runs.map((r) => r.status)).toEqual(['done', 'cancelled']);
    expect(agent.tetherRunId).toBe(t.runs[1]!.id);
  });
});

describe('AG-UI reload (real server, a worker)', () => {
  it('a page that joins after the run has the messages HttpAgent had live, in the same order', async () => {
    const tid = threadName('agui-order');
    const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
      fetch(`${url()}${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(body) });
    expect((await post('/v1/workers/claim', { worker_id: 'w1', agents: ['thinker'], wait_ms: 0 })).status).toBe(204);
    const live = new HttpAgent({ url: `${url()}/v1/ag-ui/thinker`, threadId: tid });
    live.addMessage({ id: `u-${tid}`, role: 'user', content: 'look it up' });
    const running = live.runAgent();
    const claim = (await (await post('/v1/workers/claim', { worker_id: 'w1', agents: ['thinker'], wait_ms: 10_000 })).json()) as { run: { id: string }; lease: { token: string } };
    const m = `m-${tid}`;
    // Thinking, a call and its result, more thinking, a second call whose
    // arguments were cut short (not JSON), the answer.
    const res = await post(`/v1/runs/${claim.run.id}/events`, [
      { type: 'message.started', message_id: m, role: 'assistant' },
      { type: 'reasoning.delta', message_id: m, delta: 'First, search.' },
      { type: 'tool.started', message_id: m, call_id: 'c1', name: 'search' },
      { type: 'tool.delta', message_id: m, call_id: 'c1', delta: '{"q":"logs"}' },
      { type: 'tool.finished', message_id: m, call_id: 'c1', output: { hits: 2 } },
      { type: 'reasoning.delta', message_id: m, delta: 'Two hits; read one.' },
      { type: 'tool.started', message_id: m, call_id: 'c2', name: 'read' },
      { type: 'tool.delta', message_id: m, call_id: 'c2', delta: '{"id":' },
      { type: 'tool.finished', message_id: m, call_id: 'c2', error: 'bad arguments' },
      { type: 'text.delta', message_id: m, delta: 'A log is an ordered record.' },
      { type: 'message.finished', message_id: m, status: 'done' },
      { type: 'run.finished', status: 'done' },
    ], { 'Tether-Lease': claim.lease.token });
    expect(res.status).toBe(200);
    await running;
    const reloaded = new TetherAgent({ url: `${url()}/v1/ag-ui/thinker`, threadId: tid });
    await reloaded.connectAgent();
    const shown = (msgs: Message[]) => msgs.map((x) => JSON.stringify([x.id, x.role, x.content, (x as { toolCalls?: { function: { arguments: string } }[] }).toolCalls?.map((c) => c.function.arguments)]));
    expect(shown(reloaded.messages)).toEqual(shown(live.messages));
  });
});

describe('AG-UI thread state (real server, a worker)', () => {
  it('STATE_SNAPSHOT and STATE_DELTA reach HttpAgent.state; a join brings the state in its prelude', async () => {
    const tid = threadName('agui-state');
    const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
      fetch(`${url()}${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(body) });
    // The worker's agent name becomes known with a first claim.
    expect((await post('/v1/workers/claim', { worker_id: 'w1', agents: ['stateful'], wait_ms: 0 })).status).toBe(204);
    const agent = new HttpAgent({ url: `${url()}/v1/ag-ui/stateful`, threadId: tid });
    agent.addMessage({ id: `u-${tid}`, role: 'user', content: 'plan my day' });
    const running = agent.runAgent();
    const claim = (await (await post('/v1/workers/claim', { worker_id: 'w1', agents: ['stateful'], wait_ms: 10_000 })).json()) as { run: { id: string }; lease: { token: string } };
    const append = async (events: unknown[]) => {
      const res = await post(`/v1/runs/${claim.run.id}/events`, events, { 'Tether-Lease': claim.lease.token });
      expect(res.status).toBe(200);
    };
    await append([{ type: 'state.snapshot', state: { todos: [] } }, { type: 'message.started', message_id: `m-${tid}`, role: 'assistant' }]);
    await append([{ type: 'text.delta', message_id: `m-${tid}`, delta: 'Added.' }, { type: 'state.delta', patch: [{ op: 'add', path: '/todos/-', value: 'walk' }] }]);
    await append([{ type: 'message.finished', message_id: `m-${tid}`, status: 'done' }, { type: 'run.finished', status: 'done' }]);
    await running;
    const server = (await (await fetch(`${url()}/v1/threads/${tid}`)).json()) as { state: unknown };
    expect(server.state).toEqual({ todos: ['walk'] });
    expect(agent.state).toEqual(server.state);

    const joined = new TetherAgent({ url: `${url()}/v1/ag-ui/stateful`, threadId: tid });
    await joined.connectAgent();
    expect(joined.state).toEqual(server.state);
    expect(lastAssistant(joined.messages)?.content).toBe('Added.');
  });

  it('a state the page edits between runs (setState) is the state the next run starts with, and the stream shows it', async () => {
    const tid = threadName('agui-shared');
    const agentName = 'shared';
    const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
      fetch(`${url()}${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(body) });
    expect((await post('/v1/workers/claim', { worker_id: 'w1', agents: [agentName], wait_ms: 0 })).status).toBe(204);
    // A worker that answers one run: it returns the state it started
    // with, and leaves the state next.
    const serve = async (next: unknown): Promise<unknown> => {
      const res = await post('/v1/workers/claim', { worker_id: 'w1', agents: [agentName], wait_ms: 10_000 });
      expect(res.status).toBe(200);
      const c = (await res.json()) as { run: { id: string }; lease: { token: string }; state?: unknown };
      const r = await post(`/v1/runs/${c.run.id}/events`, [{ type: 'state.snapshot', state: next }, { type: 'run.finished', status: 'done' }], { 'Tether-Lease': c.lease.token });
      expect(r.status).toBe(200);
      return c.state;
    };
    const agent = new HttpAgent({ url: `${url()}/v1/ag-ui/${agentName}`, threadId: tid });
    agent.addMessage({ id: `u1-${tid}`, role: 'user', content: 'start a list' });
    let run = agent.runAgent();
    expect(await serve({ todos: ['walk'] })).toBeUndefined();
    await run;
    expect(agent.state).toEqual({ todos: ['walk'] });

    // The user edits the shared state in the page (useCoAgent's setState).
    agent.setState({ todos: ['walk', 'read'] });
    agent.addMessage({ id: `u2-${tid}`, role: 'user', content: 'go on' });
    const states: unknown[] = [];
    run = agent.runAgent({}, { onStateSnapshotEvent: ({ event }) => void states.push(event.snapshot) });
    expect(await serve({ todos: ['walk', 'read', 'cook'] })).toEqual({ todos: ['walk', 'read'] });
    await run;
    expect(states).toEqual([{ todos: ['walk', 'read'] }, { todos: ['walk', 'read', 'cook'] }]);
    expect(agent.state).toEqual({ todos: ['walk', 'read', 'cook'] });

    // Sent back as the agent left it, it is the thread's already.
    agent.addMessage({ id: `u3-${tid}`, role: 'user', content: 'and?' });
    run = agent.runAgent();
    expect(await serve({ todos: [] })).toEqual({ todos: ['walk', 'read', 'cook'] });
    await run;
    const server = (await (await fetch(`${url()}/v1/threads/${tid}`)).json()) as { state: unknown };
    expect(server.state).toEqual({ todos: [] });
    expect(agent.state).toEqual(server.state);
  });
  it('a state larger than an event, edited in the page, is the next run\'s state: the server writes what the edit changes', async () => {
    const tid = threadName('agui-big');
    const agentName = 'shared-big';
    const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
      fetch(`${url()}${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(body) });
    expect((await post('/v1/workers/claim', { worker_id: 'w2', agents: [agentName], wait_ms: 0 })).status).toBe(204);
    // A worker that answers one run with events, one append each (each
    // under the largest event), and returns the state it started with.
    const serve = async (events: unknown[]): Promise<unknown> => {
      const res = await post('/v1/workers/claim', { worker_id: 'w2', agents: [agentName], wait_ms: 10_000 });
      expect(res.status).toBe(200);
      const c = (await res.json()) as { run: { id: string }; lease: { token: string }; state?: unknown };
      for (const ev of [...events, { type: 'run.finished', status: 'done' }]) {
        const r = await post(`/v1/runs/${c.run.id}/events`, [ev], { 'Tether-Lease': c.lease.token });
        expect(r.status).toBe(200);
      }
      return c.state;
    };
    // Two documents of 700 KiB: a state of 1.4 MiB, more than an event holds.
    const doc = (c: string) => c.repeat(700 << 10);
    const agent = new HttpAgent({ url: `${url()}/v1/ag-ui/${agentName}`, threadId: tid });
    agent.addMessage({ id: `u1-${tid}`, role: 'user', content: 'write two documents' });
    let run = agent.runAgent();
    await serve([
      { type: 'state.snapshot', state: { a: doc('a'), todos: ['walk'] } },
      { type: 'state.delta', patch: [{ op: 'add', path: '/b', value: doc('b') }] },
    ]);
    await run;
    expect(agent.state).toEqual({ a: doc('a'), todos: ['walk'], b: doc('b') });

    const warned: unknown[] = [];
    const warn = console.warn;
    console.warn = (...args: unknown[]) => void warned.push(args);
    try {
      // The page edits a little of it between runs, and drops a member.
      const edited = { a: doc('a'), b: doc('b'), done: true };
      agent.setState(edited);
      agent.addMessage({ id: `u2-${tid}`, role: 'user', content: 'go on' });
      run = agent.runAgent();
      expect(await serve([])).toEqual(edited);
      await run;
      expect(agent.state).toEqual(edited);
      const server = (await (await fetch(`${url()}/v1/threads/${tid}`)).json()) as { state: unknown };
      expect(server.state).toEqual(edited);
    } finally {
      console.warn = warn;
    }
    expect(warned).toEqual([]);
  });
});
