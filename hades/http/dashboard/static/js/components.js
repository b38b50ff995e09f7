// Small shared pieces: status badges, metadata tables with redacted chips, notices and toasts.

import { h, setText } from './dom.js';
import { isMasked } from './format.js';

const KNOWN = new Set(['Queued', 'Running', 'Succeeded', 'Failed', 'Stopped']);

/** A coloured status badge; the text always says the status, so colour is never the only signal. */
export function statusBadge(status, testid = 'status-badge') {
  const badge = h('span', { class: 'badge', testid });
  updateStatusBadge(badge, status);
  return badge;
}

export function updateStatusBadge(badge, status) {
  const value = status || 'Unknown';
  badge.dataset.status = value;
  badge.className = `badge status-${KNOWN.has(value) ? value.toLowerCase() : 'unknown'}`;
  setText(badge, value);
}

/** A value from Hades: masked values become a "redacted" chip, never the mask glyphs alone. */
export function metadataValue(value) {
  if (isMasked(value)) {
    return h('span', { class: 'chip chip-redacted', testid: 'redacted-chip', title: 'Hidden by Hades: looks like a secret' }, 'redacted');
  }
  if (value === '') return h('span', { class: 'muted' }, '(empty)');
  return h('code', { class: 'meta-value' }, String(value));
}

/** A key/value table of metadata, or a quiet line when there is none. */
export function metadataTable(metadata, { label = 'Metadata', testid = 'metadata-table' } = {}) {
  const entries = Object.entries(metadata ?? {}).sort(([a], [b]) => a.localeCompare(b));
  if (entries.length === 0) return h('p', { class: 'muted', testid: `${testid}-empty` }, 'No metadata.');
  return h(
    'table',
    { class: 'kv-table', testid },
    h('caption', { class: 'visually-hidden' }, label),
    h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Key'), h('th', { scope: 'col' }, 'Value'))),
    h(
      'tbody',
      {},
      entries.map(([key, value]) =>
        h('tr', { testid: 'metadata-row', 'data-key': key }, h('th', { scope: 'row' }, h('code', {}, key)), h('td', {}, metadataValue(value))),
      ),
    ),
  );
}

/** A notice box: ``kind`` is info, warning or danger. */
export function notice(kind, text, testid) {
  return h('div', { class: `notice notice-${kind}`, role: kind === 'danger' ? 'alert' : 'note', testid }, text);
}

/** A centred "nothing here" message. */
export function emptyState(text, testid = 'empty-state') {
  return h('div', { class: 'empty', testid }, text);
}

let toastRegion = null;

/** A short-lived message in a polite live region. */
export function toast(text, kind = 'info') {
  if (!toastRegion) {
    toastRegion = h('div', { class: 'toasts', role: 'status', 'aria-live': 'polite', testid: 'toasts' });
    document.body.append(toastRegion);
  }
  const item = h('div', { class: `toast toast-${kind}`, testid: 'toast' }, text);
  toastRegion.append(item);
  setTimeout(() => item.remove(), 5000);
}

/** A label/value pair for a <dl>. */
export function field(label, value, testid) {
  return h('div', { class: 'field' }, h('dt', {}, label), h('dd', { testid }, value));
}
