// The TypeScript samples of README.md, docs/ag-ui.md and docs/ai-sdk.md,
// kept honest: every block type-checks against the package's sources as an
// app would write it (strict), and README's quick start runs as written
// against a real `tether serve`, but for its URL and thread id. It followed
// a thread that did not exist, and its render(view) did not compile.
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { TetherClient } from '../../src/client.js';
import { threadName, until, url } from './helpers.js';

const dir = resolve(import.meta.dirname, '../..');
const readme = readFileSync(join(dir, 'README.md'), 'utf8');
const docs = { 'README.md': readme, 'ag-ui.md': readFileSync(join(dir, '../../docs/ag-ui.md'), 'utf8'), 'ai-sdk.md': readFileSync(join(dir, '../../docs/ai-sdk.md'), 'utf8') };

/** The fenced blocks of a document in language `lang`, in order. */
const blocks = (lang: string, doc = readme) => [...doc.matchAll(new RegExp('```' + lang + '\\n([\\s\\S]*?)```', 'g'))].map((m) => m[1]!);

// What the fragments take from the page around them: the client of the
// quick start, the app's own components, and the chat of the AI SDK's page.
const prelude = `
declare const client: import('@tether/client').TetherClient;
declare function show(text: string | undefined): void;
declare function ConnectionDot(props: { state: string }): import('react').ReactNode;
declare function Message(props: { message: import('@tether/client').Message; recovered: boolean }): import('react').ReactNode;
declare const id: string;
declare const transport: import('@tether/client/ai-sdk').TetherChatTransport;
declare const useChat: typeof import('@ai-sdk/react').useChat;
declare const useState: typeof import('react').useState;
declare const lastAssistantMessageIsCompleteWithToolCalls: typeof import('ai').lastAssistantMessageIsCompleteWithToolCalls;
declare function applyPatch(doc: unknown, patch: unknown): unknown;
declare const p: { toolName: string; toolCallId: string };
`;

describe('README.md and docs/ag-ui.md, docs/ai-sdk.md', () => {
  it('installs the tarball npm pack writes for this version', () => {
    const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name: string; version: string };
    const tgz = `${pkg.name.replace('@', '').replace('/', '-')}-${pkg.version}.tgz`;
    for (const doc of [readme, docs['ag-ui.md']]) {
      const installs = [...doc.matchAll(/npm install (\S+\.tgz)/g)].map((m) => m[1]!);
      expect(installs.length).toBeGreaterThan(0);
      for (const path of installs) expect(path).toBe(`/path/to/tether/web/${tgz}`);
    }
    expect(readme).toContain(`npm pack -w client   # writes web/${tgz}`);
  });

  it('every TypeScript sample type-checks, strict', () => {
    const samples = Object.entries(docs).flatMap(([doc, text]) =>
      (['ts', 'tsx'] as const).flatMap((ext) => blocks(ext, text).map((code) => ({ doc, code, ext }))),
    );
    expect(samples.length).toBeGreaterThanOrEqual(10);
    const config = ts.parseJsonConfigFileContent(ts.readConfigFile(join(dir, 'tsconfig.json'), ts.sys.readFile).config, ts.sys, dir);
    const options: ts.CompilerOptions = {
      ...config.options,
      noUnusedLocals: false,
      noUnusedParameters: false,
      baseUrl: dir,
      paths: { '@tether/client': ['src/index.ts'], '@tether/client/*': ['src/*.ts'] },
    };
    const files = new Map<string, string>([[join(dir, 'readme-prelude.d.ts'), prelude]]);
    // A block that names its file (// app/chat/[id]/chat.tsx) is that file,
    // for the blocks that import it ('./chat').
    const named = new Map<string, number>();
    samples.forEach((s, i) => {
      const m = /^\/\/ \S*\/([\w-]+)\.tsx?\b/.exec(s.code);
      if (m) named.set(m[1]!, i);
    });
    samples.forEach((s, i) => {
      const code = s.code.replace(/from '\.\/([\w-]+)'/g, (all, name: string) => (named.has(name) ? `from './readme-sample-${named.get(name)}'` : all));
      files.set(join(dir, `readme-sample-${i}.${s.ext}`), `${code}\nexport {};\n`);
    });
    const host = ts.createCompilerHost(options);
    const getSourceFile = host.getSourceFile.bind(host);
    host.getSourceFile = (name, lang, ...rest) => {
      const text = files.get(resolve(name));
      return text !== undefined ? ts.createSourceFile(name, text, lang) : getSourceFile(name, lang, ...rest);
    };
    const fileExists = host.fileExists.bind(host);
    host.fileExists = (name) => files.has(resolve(name)) || fileExists(name);
    const program = ts.createProgram([...files.keys()], options, host);
    const errors = ts
      .getPreEmitDiagnostics(program)
      .filter((d) => d.file && files.has(resolve(d.file.fileName)))
      .map((d) => {
        const { line } = d.file!.getLineAndCharacterOfPosition(d.start ?? 0);
        const i = Number(/readme-sample-(\d+)/.exec(d.file!.fileName)?.[1]);
        return `${samples[i]?.doc} sample ${i} (${samples[i]?.code.split('\n')[0]}…), line ${line + 1}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
      });
    expect(errors).toEqual([]);
  });

  it('the quick start runs against a real server as written, then the one-request run', async () => {
    const [quick, one] = blocks('ts');
    const tid = threadName('readme');
    const direct = new TetherClient({ baseUrl: url(), lifecycle: null });
    // A sample as a function of the names it takes from the page.
    const sample = (code: string, ...params: string[]) => {
      code = code
        .replace(/^import .*$/gm, '')
        .replace("baseUrl: 'https://tether.example.com'", `baseUrl: ${JSON.stringify(url())}`)
        .replaceAll("'t1'", JSON.stringify(tid));
      const js = ts.transpileModule(code, { compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext } }).outputText;
      const AsyncFunction = Object.getPrototypeOf(async () => {}).constructor as new (...args: string[]) => (...a: unknown[]) => Promise<any>;
      return new AsyncFunction(...params, js);
    };

    const live = await sample(`${quick}\nreturn live;`, 'TetherClient')(TetherClient);
    expect(live.store.getState().error).toBeFalsy();
    let snap = await direct.getThread(tid);
    expect(snap.runs).toHaveLength(1);
    expect(snap.messages[0]?.parts).toEqual([{ type: 'text', text: 'Hello' }]);
    await until(async () => (await direct.getThread(tid)).thread.status === 'idle', 20_000, 'the first run to end');

    const shown: (string | undefined)[] = [];
    const finished = await sample(`${one}\nreturn finished;`, 'client', 'show')(direct, (s: string | undefined) => shown.push(s));
    expect(finished).toMatchObject({ thread_id: tid, status: 'done' });
    expect(shown.at(-1)).toMatch(/^Here is what I found about “Hi”/);
    snap = await direct.getThread(tid);
    expect(snap.runs.map((r) => r.status)).toEqual(['done', 'done']);
  });
});
