// The Timeline tab: the job's events, and a scrubber that shows the job as it was at any event
// (GET /api/jobs/:id?at=<the event's time>).

import { getJSON, jobPath } from '../api.js';
import { emptyState, notice, statusBadge } from '../components.js';
import { fill, h, setText } from '../dom.js';
import { EVENT_LABELS, formatClock, formatDateTime, formatSeconds } from '../format.js';

const QUIET = new Set(['seq', 'type', 'at']);

/** ``{"volume": 0.0008, "run": 1.3}`` (seconds) as ``volume 0.80 ms · run 1.30 s``; other objects as JSON. */
function fieldText(key, value) {
  if (typeof value !== 'object') return String(value);
  const entries = Object.entries(value);
  if (key === 'phases' && entries.every(([, v]) => typeof v === 'number')) {
    return entries.map(([k, v]) => `${k} ${formatSeconds(v)}`).join(' · ');
  }
  return JSON.stringify(value);
}

function describe(event) {
  return Object.entries(event)
    .filter(([key, value]) => !QUIET.has(key) && value !== null && value !== undefined && value !== '' && value !== false)
    .map(([key, value]) => h('span', { class: 'ev-field' }, h('span', { class: 'ev-key' }, key.replaceAll('_', ' ')), ' ',
      fieldText(key, value)));
}

function tone(type) {
  if (['failed', 'logs_forward_failed', 'webhook_failed'].includes(type)) return 'bad';
  if (['succeeded', 'webhook_delivered', 'logs_forwarded'].includes(type)) return 'good';
  if (['stopped', 'cancel_requested'].includes(type)) return 'muted';
  return 'neutral';
}

export class TimelinePanel {
  constructor(jobId) {
    this.jobId = jobId;
    this.events = [];
    this.index = -1;
    this.loadToken = 0;
    this.stateToken = 0;
    this.el = h('div', { class: 'timeline-panel' }, h('p', { class: 'muted' }, 'Loading…'));
  }

  async load() {
    const token = ++this.loadToken;
    try {
      const data = await getJSON(jobPath(this.jobId, '/events'));
      if (token !== this.loadToken) return;
      const events = data.events ?? [];
      if (this.scrubber && events.length === this.events.length) return; // nothing new: keep the scrubber as it is
      const atEnd = this.index === this.events.length - 1;
      this.events = events;
      this.build(atEnd ? this.events.length - 1 : Math.min(this.index, this.events.length - 1));
    } catch (e) {
      if (token !== this.loadToken || e.status === 401) return;
      fill(this.el, e.status === 404 ? emptyState('No events recorded for this job yet.', 'timeline-empty')
        : notice('danger', `Could not load the events: ${e.message}`, 'timeline-error'));
    }
  }

  build(index) {
    const count = this.events.length;
    if (count === 0) {
      fill(this.el, emptyState('No events recorded for this job yet.', 'timeline-empty'));
      return;
    }
    this.scrubber = h('input', {
      type: 'range', id: 'timeline-scrubber', min: 0, max: count - 1, step: 1, value: index, testid: 'timeline-scrubber',
      on: { input: () => this.select(Number(this.scrubber.value)) },
    });
    this.caption = h('span', { class: 'scrub-caption', testid: 'timeline-caption' });
    this.items = this.events.map((event, i) =>
      h('li', { class: `ev ev-${tone(event.type)}`, testid: 'timeline-event', 'data-type': event.type, 'data-index': i },
        h('button', { type: 'button', class: 'ev-dot', 'aria-label': `Show the job at event ${i + 1}: ${EVENT_LABELS[event.type] ?? event.type}`,
          on: { click: () => this.select(i) } }),
        h('div', { class: 'ev-body' },
          h('div', { class: 'ev-head' }, h('strong', {}, EVENT_LABELS[event.type] ?? event.type),
            h('time', { datetime: event.at, title: formatDateTime(event.at) }, formatClock(event.at))),
          h('div', { class: 'ev-fields' }, describe(event)))));
    this.state = h('div', { class: 'card past-state', testid: 'timeline-state', 'aria-live': 'polite' });
    fill(this.el,
      h('div', { class: 'scrub' },
        h('label', { for: 'timeline-scrubber' }, 'Replay the job up to an event'), this.scrubber, this.caption),
      h('div', { class: 'timeline-grid' },
        h('ol', { class: 'timeline', 'aria-label': 'Events, oldest first' }, this.items),
        this.state));
    this.select(index);
  }

  select(index) {
    this.index = index;
    if (Number(this.scrubber.value) !== index) this.scrubber.value = String(index);
    const event = this.events[index];
    setText(this.caption, `Event ${index + 1} of ${this.events.length}: ${EVENT_LABELS[event.type] ?? event.type} at ${formatClock(event.at)}`);
    this.items.forEach((item, i) => {
      item.classList.toggle('ev-future', i > index);
      item.classList.toggle('ev-current', i === index);
      if (i === index) item.setAttribute('aria-current', 'step');
      else item.removeAttribute('aria-current');
    });
    clearTimeout(this.debounce);
    this.debounce = setTimeout(() => this.fetchState(event), 120);
  }

  async fetchState(event) {
    const token = ++this.stateToken;
    this.state.dataset.loading = 'true';
    try {
      const past = await getJSON(`${jobPath(this.jobId)}?at=${encodeURIComponent(event.at)}`);
      if (token === this.stateToken) this.showState(past, event);
    } catch (e) {
      if (token === this.stateToken && e.status !== 401) fill(this.state, notice('danger', `Could not load that moment: ${e.message}`));
    }
  }

  showState(past, event) {
    delete this.state.dataset.loading;
    this.state.dataset.at = event.at;
    const steps = past.steps ?? [];
    fill(this.state,
      h('h3', {}, 'The job at ', h('time', { datetime: event.at }, formatDateTime(event.at))),
      h('p', {}, statusBadge(past.status, 'timeline-state-status'), past.attempt ? ` attempt ${past.attempt}` : ''),
      past.reason ? h('p', { class: 'reason-text', testid: 'timeline-state-reason' }, past.reason) : null,
      steps.length ? h('table', { class: 'data-table compact' },
        h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Step'), h('th', { scope: 'col' }, 'Status'), h('th', { scope: 'col' }, 'Exit'))),
        h('tbody', {}, steps.map((s, i) => h('tr', { testid: 'timeline-state-step' },
          h('td', {}, s.name || `Step ${s.id ?? i + 1}`),
          h('td', {}, s.status ?? '—'),
          h('td', { class: 'num' }, s.exitCode ?? '—'))))) : null);
  }

  destroy() {
    clearTimeout(this.debounce);
    this.loadToken += 1;
    this.stateToken += 1;
  }
}
