// @vitest-environment happy-dom
import { StrictMode, act } from 'react';
import { createRoot } from 'react-dom/client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TetherClient } from '../src/client.js';
import { TetherProvider, useTetherRun, useTetherThread } from '../src/react.js';
import { FakeFetch, connected, eventFrame, frame, settle } from './helpers/fake.js';
import { emptySnapshot, reduceVector } from './helpers/vectors.js';

(globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = true;

const v = reduceVector('01');
let ff: FakeFetch;
let client: TetherClient;
let container: HTMLElement;

beforeEach(() => {
  ff = new FakeFetch();
  client = new TetherClient({ baseUrl: 'http://tether.test', fetch: ff.fetch, lifecycle: null });
  container = document.createElement('div');
});

afterEach(() => {
  expect(ff.open, 'connections left').toBe(0);
});

function Thread({ id }: { id: string }) {
  const t = useTetherThread(id, { reconcileIntervalMs: 0 });
  const text = t.messages
    .filter((m) => m.role === 'assistant')
    .flatMap((m) => m.parts)
    .map((p) => (p.type === 'text' ? p.text : ''))
    .join('');
  return (
    <p data-connection={t.connection} data-status={t.thread?.status ?? ''}>
      {text}
    </p>
  );
}

function Run({ id }: { id: string }) {
  const r = useTetherRun(id, { client, reconcileIntervalMs: 0 });
  return <p>{r.runs[0]?.status ?? 'none'}</p>;
}

describe('useTetherThread', () => {
  it('renders the snapshot then live events, and closes its connection on unmount', async () => {
    const p = ff.expectSSE();
    const root = createRoot(container);
    await act(async () => {
      root.render(
        <TetherProvider client={client}>
          <Thread id="t1" />
        </TetherProvider>,
      );
    });
    const pipe = await p;
    await act(async () => {
      pipe.push(connected() + frame('snapshot', emptySnapshot(v), '-1') + v.events.slice(0, 6).map(eventFrame).join(''));
      await settle();
    });
    const el = container.querySelector('p')!;
    expect(el.textContent).toBe('Hello');
    expect(el.dataset.connection).toBe('open');
    expect(el.dataset.status).toBe('busy');
    await act(async () => {
      pipe.push(v.events.slice(6).map(eventFrame).join(''));
      await settle();
    });
    expect(el.textContent).toBe('Hello world');
    expect(el.dataset.status).toBe('idle');
    await act(async () => root.unmount());
    await settle();
    expect(pipe.closed).toBe(true);
  });

  it('keeps one connection under StrictMode and resumes from the store on remount', async () => {
    ff.fallback = ff.sse().handler; // each connection gets a body
    const root = createRoot(container);
    await act(async () => {
      root.render(
        <StrictMode>
          <TetherProvider client={client}>
            <Thread id="t1" />
          </TetherProvider>
        </StrictMode>,
      );
      await settle();
    });
    expect(ff.open).toBe(1);
    await act(async () => root.unmount());
    await settle();
  });
});

describe('useTetherRun', () => {
  it('follows a run until it ends', async () => {
    const p = ff.expectSSE();
    const root = createRoot(container);
    await act(async () => root.render(<Run id="r1" />));
    const pipe = await p;
    expect(ff.requests[0]!.url).toBe('http://tether.test/v1/runs/r1/events');
    await act(async () => {
      pipe.push(connected({ run_id: 'r1' }) + frame('snapshot', emptySnapshot(v), '-1') + v.events.map(eventFrame).join(''));
      await settle();
    });
    expect(container.textContent).toBe('done');
    await act(async () => root.unmount());
  });
});
