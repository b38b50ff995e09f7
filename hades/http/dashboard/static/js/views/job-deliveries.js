// The Deliveries tab: every attempt to tell the client about the job (logs to callback_url, the status webhook).

import { getJSON, jobPath } from '../api.js';
import { emptyState, notice } from '../components.js';
import { fill, h } from '../dom.js';
import { formatDateTime, formatDuration } from '../format.js';

const COLUMNS = ['Kind', 'Attempt', 'Time', 'URL', 'OK', 'Status', 'Error', 'Duration'];

function row(d) {
  return h(
    'tr',
    { testid: 'deliveries-row', 'data-ok': String(Boolean(d.ok)) },
    h('td', {}, d.kind ?? '—'),
    h('td', { class: 'num' }, d.delivery_attempt ?? '—'),
    h('td', {}, formatDateTime(d.at)),
    h('td', { class: 'url' }, h('code', { title: d.url ?? '' }, d.url ?? '—')),
    h('td', {}, h('span', { class: `chip ${d.ok ? 'chip-ok' : 'chip-bad'}` }, d.ok ? 'ok' : 'failed')),
    h('td', { class: 'num' }, d.status_code ?? '—'),
    h('td', { class: 'error-cell' }, d.error ?? ''),
    h('td', { class: 'num' }, d.duration_ms === null || d.duration_ms === undefined ? '—' : formatDuration(d.duration_ms)),
  );
}

export class DeliveriesPanel {
  constructor(jobId) {
    this.jobId = jobId;
    this.el = h('div', { class: 'deliveries' }, h('p', { class: 'muted' }, 'Loading…'));
    this.token = 0;
  }

  async load() {
    const token = ++this.token;
    try {
      const data = await getJSON(jobPath(this.jobId, '/deliveries'));
      if (token === this.token) this.show(data.deliveries ?? []);
    } catch (e) {
      if (token !== this.token || e.status === 401) return;
      fill(this.el, e.status === 404 ? emptyState('No deliveries recorded for this job.', 'deliveries-empty')
        : notice('danger', `Could not load deliveries: ${e.message}`, 'deliveries-error'));
    }
  }

  show(deliveries) {
    if (deliveries.length === 0) {
      fill(this.el, emptyState('No deliveries recorded. Hades sends them only for jobs with a callback_url or status_callback_url.', 'deliveries-empty'));
      return;
    }
    fill(this.el, h('div', { class: 'table-wrap' },
      h('table', { class: 'data-table', testid: 'deliveries-table' },
        h('caption', { class: 'visually-hidden' }, 'Delivery attempts, oldest first'),
        h('thead', {}, h('tr', {}, COLUMNS.map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', {}, deliveries.map(row)))));
  }
}
