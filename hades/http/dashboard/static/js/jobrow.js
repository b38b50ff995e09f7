// One job as a row of cells, shared by the jobs table and the overview's recent jobs.

import { statusBadge, updateStatusBadge } from './components.js';
import { h, setText } from './dom.js';
import { formatDuration, jobDurationMs, jobUpdatedAt, relativeTime, shortId } from './format.js';

export const JOB_COLUMNS = [
  { key: 'name', label: 'Name' },
  { key: 'id', label: 'ID' },
  { key: 'status', label: 'Status' },
  { key: 'priority', label: 'Priority' },
  { key: 'steps', label: 'Steps' },
  { key: 'duration', label: 'Duration' },
  { key: 'updated', label: 'Updated' },
];

/** The cells of an empty row; ``fillJobRow`` puts a job into them. */
export function createJobRow(testid) {
  const cell = (key, ...children) => h('div', { class: `cell cell-${key}`, role: 'cell' }, ...children);
  const link = h('a', { class: 'row-link' });
  const badge = statusBadge('Unknown', 'job-status');
  const reason = h('span', { class: 'reason' });
  const row = h(
    'div',
    { class: 'vrow job-row', role: 'row', testid },
    cell('name', link),
    cell('id', h('code', {})),
    cell('status', badge, reason),
    cell('priority', h('span', { class: 'priority' })),
    cell('steps'),
    cell('duration'),
    cell('updated'),
  );
  row._parts = { link, badge, reason, cells: row.children };
  return row;
}

export function fillJobRow(row, job, now) {
  const { link, badge, reason, cells } = row._parts;
  row.dataset.jobId = job.id;
  row.dataset.status = job.status ?? '';
  link.href = `/jobs/${encodeURIComponent(job.id)}`;
  setText(link, job.name || '(unnamed job)');
  link.title = job.name || '';
  setText(cells[1].firstChild, shortId(job.id));
  cells[1].title = job.id;
  updateStatusBadge(badge, job.status);
  setText(reason, job.reason ?? '');
  reason.title = job.reason ?? '';
  const priority = cells[3].firstChild;
  setText(priority, job.priority ?? '—');
  priority.className = `priority priority-${job.priority ?? 'none'}`;
  setText(cells[4], job.stepCount ?? '—');
  setText(cells[5], formatDuration(jobDurationMs(job, now)));
  const updated = jobUpdatedAt(job);
  setText(cells[6], relativeTime(updated, now));
  cells[6].title = updated ?? '';
}

/** The header row for the job columns. */
export function jobHeaderRow() {
  return h(
    'div',
    { class: 'vrow vhead', role: 'row' },
    JOB_COLUMNS.map((c) => h('div', { class: `cell cell-${c.key}`, role: 'columnheader' }, c.label)),
  );
}
