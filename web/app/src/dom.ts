// A few helpers to build DOM nodes. Text always goes in as text nodes, never
// as HTML, so nothing a server or an agent sends can inject markup.

/** Attributes and properties {@link h} understands. */
export interface Props {
  /** Class names (space separated). */
  class?: string;
  /** Sets `data-testid`. */
  testid?: string;
  /** Other attributes; `false`, null and undefined leave the attribute out. */
  attrs?: Record<string, string | number | boolean | null | undefined>;
  /** Event listeners, by event name. */
  on?: Partial<Record<keyof HTMLElementEventMap, (e: Event) => void>>;
}

/** A child of {@link h}: a node, text, or nothing. */
export type Child = Node | string | null | undefined | false;

/** Makes an element with props and children. */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, props: Props = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  if (props.class) el.className = props.class;
  if (props.testid) el.dataset.testid = props.testid;
  for (const [k, v] of Object.entries(props.attrs ?? {})) {
    if (v === false || v === null || v === undefined) continue;
    el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const [k, fn] of Object.entries(props.on ?? {})) if (fn) el.addEventListener(k, fn);
  append(el, children);
  return el;
}

/** Appends children (text becomes text nodes). */
export function append(el: Node, children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    el.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
  }
}

/** Sets an element's text if it changed (keeps selections and avoids layout work). */
export function setText(el: Element, text: string): void {
  if (el.textContent !== text) el.textContent = text;
}

/** Sets or removes a data attribute if it changed. */
export function setData(el: HTMLElement, key: string, value: string | undefined): void {
  if (value === undefined) {
    if (key in el.dataset) delete el.dataset[key];
  } else if (el.dataset[key] !== value) el.dataset[key] = value;
}

/**
 * Makes `parent`'s children exactly `nodes`, in order, moving only what is
 * out of place (a streaming transcript keeps its nodes, and so its state:
 * open details, focus, selection).
 */
export function reconcile(parent: Element, nodes: readonly Node[]): void {
  for (let i = 0; i < nodes.length; i++) {
    const want = nodes[i]!;
    const at = parent.childNodes[i];
    if (at !== want) parent.insertBefore(want, at ?? null);
  }
  while (parent.childNodes.length > nodes.length) parent.removeChild(parent.lastChild!);
}

/** An inline SVG icon from a path list (24×24 viewBox, stroked). */
export function icon(name: keyof typeof ICONS, cls = 'icon'): SVGSVGElement {
  const ns = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('viewBox', '0 0 24 24');
  svg.setAttribute('class', cls);
  svg.setAttribute('aria-hidden', 'true');
  for (const d of ICONS[name]) {
    const p = document.createElementNS(ns, 'path');
    p.setAttribute('d', d);
    svg.appendChild(p);
  }
  return svg;
}

const ICONS = {
  plus: ['M12 5v14', 'M5 12h14'],
  menu: ['M4 6h16', 'M4 12h16', 'M4 18h16'],
  send: ['M5 12h14', 'M13 6l6 6-6 6'],
  stop: ['M7 7h10v10H7z'],
  tool: ['M14.7 6.3a4 4 0 0 0-5.4 5.4L4 17l3 3 5.3-5.3a4 4 0 0 0 5.4-5.4l-2.5 2.5-2.4-.6-.6-2.4z'],
  spark: ['M12 3l1.8 5.2L19 10l-5.2 1.8L12 17l-1.8-5.2L5 10l5.2-1.8z', 'M19 15l.7 1.8 1.8.7-1.8.7L19 20l-.7-1.8-1.8-.7 1.8-.7z'],
  chevron: ['M9 6l6 6-6 6'],
  alert: ['M12 4l9 16H3z', 'M12 10v4', 'M12 17v.01'],
  refresh: ['M20 11a8 8 0 1 0-2.3 5.7', 'M20 5v6h-6'],
  key: ['M13 15.5a5.5 5.5 0 1 1-11 0 5.5 5.5 0 1 1 11 0', 'M21 2l-9.6 9.6', 'M15.5 7.5l2.3 2.3a1 1 0 0 0 1.4 0l2.1-2.1a1 1 0 0 0 0-1.4L19 4'],
  close: ['M6 6l12 12', 'M18 6L6 18'],
  sliders: ['M4 7h10', 'M18 7h2', 'M4 17h4', 'M12 17h8', 'M16 5v4', 'M10 15v4'],
} as const;
