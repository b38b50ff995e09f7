// Building DOM without markup strings: every piece of data lands in a text node, so nothing a job carries
// (names, reasons, logs, metadata) can inject markup. No innerHTML anywhere in the app.

const PROPERTIES = new Set(['value', 'checked', 'disabled', 'hidden', 'open', 'selected', 'textContent', 'indeterminate']);

/** Set attributes, properties, listeners and dataset on an element; null/undefined/false are skipped. */
export function setProps(el, props) {
  for (const [key, value] of Object.entries(props ?? {})) {
    if (value === undefined || value === null) continue;
    if (key === 'class') el.setAttribute('class', value);
    else if (key === 'testid') el.dataset.testid = value;
    else if (key === 'on') for (const [type, fn] of Object.entries(value)) el.addEventListener(type, fn);
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else if (key === 'style' && typeof value === 'object') Object.assign(el.style, value);
    else if (PROPERTIES.has(key)) el[key] = value;
    else if (value === false) el.removeAttribute(key);
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  return el;
}

/** Append children: nodes as they are, strings and numbers as text nodes, arrays flattened, null/false skipped. */
export function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else if (child instanceof Node) el.append(child);
    else el.append(document.createTextNode(String(child)));
  }
  return el;
}

/** ``h('button', {class: 'btn', on: {click}}, 'Save')`` */
export function h(tag, props, ...children) {
  return append(setProps(document.createElement(tag), props), children);
}

/** Replace an element's children. */
export function fill(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

/** Set text only when it changed (cheap to call on every update). */
export function setText(el, text) {
  const value = text === null || text === undefined ? '' : String(text);
  if (el.textContent !== value) el.textContent = value;
  return el;
}

/** Run ``fn`` once per animation frame at most, with a timer as a fallback for hidden tabs (no rAF there). */
export function frameScheduler(fn) {
  let pending = false;
  const run = () => {
    if (!pending) return;
    pending = false;
    fn();
  };
  return () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(run);
    setTimeout(run, 250);
  };
}
