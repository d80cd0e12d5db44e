// One connection shared across tabs (BroadcastChannel leader), against a
// real server. Node's BroadcastChannel connects the "tabs" of this process.
import { describe, expect, it } from 'vitest';
import type { LiveThread } from '../../src/live.js';
import type { SharedSubscription } from '../../src/shared.js';
import { demo, expectSameAsServer, openStreams, setup, threadName, until } from './helpers.js';

const role = (t: LiveThread) => (t.subscription as SharedSubscription).role;

describe('shared connection across tabs (real server)', () => {
  it('ten tabs use one connection; when the leader closes another takes over from its offset', async () => {
    const { direct } = setup();
    const tid = threadName('shared');
    await direct.createThread({ id: tid });
    const before = await openStreams();
    const share = { channel: `test:${tid}`, heartbeatMs: 100, leaseMs: 500, electionMs: 40 };
    const tabs = Array.from({ length: 10 }, () => setup().client.followThread(tid, { share, reconcileIntervalMs: 0 }));
    await until(() => tabs.every((t) => t.store.getState().loaded) && tabs.filter((t) => role(t) === 'leader').length === 1, 5000, 'one leader');
    await until(async () => (await openStreams()) === before + 1, 3000, 'one stream');
    expect(tabs.filter((t) => role(t) === 'follower')).toHaveLength(9);

    const r1 = await tabs[3]!.startRun(demo(60, 2));
    await until(() => tabs.every((t) => t.store.run(r1.id)?.status === 'done'), 10_000, 'all tabs see run 1');
    for (const t of tabs) await expectSameAsServer(t.store, direct);

    const leader = tabs.find((t) => role(t) === 'leader')!;
    leader.close();
    const rest = tabs.filter((t) => t !== leader);
    await until(() => rest.filter((t) => role(t) === 'leader').length === 1 && rest.every((t) => role(t) !== 'electing'), 5000, 'new leader');
    await until(async () => (await openStreams()) === before + 1, 3000, 'still one stream');

    const r2 = await rest[0]!.startRun(demo(40, 2));
    await until(() => rest.every((t) => t.store.run(r2.id)?.status === 'done'), 10_000, 'all tabs see run 2');
    for (const t of rest) await expectSameAsServer(t.store, direct);
    expect(rest.every((t) => t.store.getState().connection === 'open')).toBe(true);

    for (const t of rest) t.close();
    await until(async () => (await openStreams()) === before, 3000, 'no stream left');
  });

  it('a leader that goes silent without saying goodbye is replaced after its lease', async () => {
    const { direct } = setup();
    const tid = threadName('frozen');
    await direct.createThread({ id: tid });
    const share = { channel: `test:${tid}`, heartbeatMs: 100, leaseMs: 400, electionMs: 40 };
    const tabs = Array.from({ length: 3 }, () => setup().client.followThread(tid, { share, reconcileIntervalMs: 0 }));
    await until(() => tabs.filter((t) => role(t) === 'leader').length === 1 && tabs.every((t) => t.store.getState().loaded), 5000, 'leader');
    const leader = tabs.find((t) => role(t) === 'leader')!;
    // Freeze it: its channel goes quiet (a crashed or frozen tab), its stream stays.
    const s = leader.subscription as unknown as { ch: BroadcastChannel; beatTimer: ReturnType<typeof setTimeout> };
    clearTimeout(s.beatTimer);
    s.ch.close();
    const rest = tabs.filter((t) => t !== leader);
    await until(() => rest.some((t) => role(t) === 'leader'), 3000, 'takeover');
    const run = await rest[0]!.startRun(demo(20, 1));
    await until(() => rest.every((t) => t.store.run(run.id)?.status === 'done'), 10_000, 'run seen');
    for (const t of rest) await expectSameAsServer(t.store, direct);
    for (const t of tabs) t.close();
  });
});
