// The jobs table: status filters, windowed rendering (10,000 rows stay fast), live rows from /api/stream.

import { getJSON } from '../api.js';
import { notice } from '../components.js';
import { fill, h, setText } from '../dom.js';
import { formatCount, sortByRecency, STATUSES } from '../format.js';
import { createJobRow, fillJobRow, jobHeaderRow } from '../jobrow.js';
import { VirtualTable } from '../vlist.js';

const LIMIT = 10000;
const POLL_MS = 15000;
const FILTERS = ['All', ...STATUSES];

export function mountJobs(root, { feed, router }) {
  const initial = new URLSearchParams(location.search).get('status');
  let filter = FILTERS.includes(initial) ? initial : 'All';
  let jobs = new Map();
  let total = 0;
  let loadToken = 0;

  const table = new VirtualTable({
    label: 'Jobs',
    header: jobHeaderRow(),
    createRow: createJobRow,
    fillRow: fillJobRow,
    onActivate: (job) => router.go(`/jobs/${encodeURIComponent(job.id)}`),
    testid: 'jobs-table',
    rowTestid: 'jobs-row',
    empty: 'No jobs match this filter.',
  });
  const count = h('p', { class: 'muted count', testid: 'jobs-count', 'aria-live': 'polite' });
  const error = h('div', { class: 'view-error' });
  const buttons = FILTERS.map((status) =>
    h('button', {
      type: 'button',
      class: 'btn btn-filter',
      testid: `filter-${status}`,
      'data-status': status,
      'aria-pressed': String(status === filter),
      on: { click: () => setFilter(status) },
    }, status),
  );

  root.append(
    h('section', { class: 'view jobs', 'aria-labelledby': 'jobs-title' },
      h('div', { class: 'view-head' }, h('h1', { id: 'jobs-title' }, 'Jobs'), count),
      h('div', { class: 'filters', role: 'group', 'aria-label': 'Filter by status', testid: 'jobs-filters' }, buttons),
      error,
      table.el),
  );

  const matches = (job) => filter === 'All' || job.status === filter;

  function show() {
    table.setItems(sortByRecency([...jobs.values()]));
    const shown = jobs.size;
    setText(count, total > shown ? `Latest ${formatCount(shown)} of ${formatCount(total)} jobs` : `${formatCount(shown)} ${shown === 1 ? 'job' : 'jobs'}`);
  }

  async function load() {
    const token = ++loadToken;
    const query = filter === 'All' ? '' : `&status=${encodeURIComponent(filter)}`;
    try {
      const data = await getJSON(`/api/jobs?limit=${LIMIT}${query}`);
      if (token !== loadToken) return;
      jobs = new Map(data.jobs.map((j) => [j.id, j]));
      total = data.total ?? data.jobs.length;
      fill(error);
      show();
    } catch (e) {
      if (token === loadToken && e.status !== 401) fill(error, notice('danger', `Could not load jobs: ${e.message}`, 'jobs-error'));
    }
  }

  function setFilter(status) {
    filter = status;
    for (const b of buttons) b.setAttribute('aria-pressed', String(b.dataset.status === status));
    const url = status === 'All' ? '/jobs' : `/jobs?status=${encodeURIComponent(status)}`;
    history.replaceState(null, '', url);
    table.scroller.scrollTop = 0;
    load();
  }

  function apply(batch) {
    let changed = false;
    for (const job of batch) {
      const known = jobs.has(job.id);
      if (matches(job)) {
        if (!known) total += 1;
        jobs.set(job.id, job);
        changed = true;
      } else if (known) {
        jobs.delete(job.id);
        total = Math.max(0, total - 1);
        changed = true;
      }
    }
    if (changed) show();
  }

  load();
  const off = [feed.on('job', apply), feed.onStale(load)];
  const poll = setInterval(() => feed.live || load(), POLL_MS);
  const tick = setInterval(() => table.refresh(), 10000);
  return () => {
    off.forEach((f) => f());
    clearInterval(poll);
    clearInterval(tick);
    table.destroy();
  };
}
