// The Timing tab: where the job's wall-clock time went, as a waterfall of consecutive phases.

import { emptyState } from '../components.js';
import { h } from '../dom.js';
import { formatSeconds } from '../format.js';

const JOB_PHASES = [
  ['scheduling', 'Scheduling'],
  ['queue_wait', 'Queue wait'],
  ['volume', 'Volume'],
  ['images', 'Images'],
];
const STEP_PHASES = ['create', 'start', 'run', 'logs', 'teardown'];

/** The waterfall's rows: ``{key, label, seconds, step}``. */
export function timingRows(timing) {
  const rows = JOB_PHASES.map(([key, label]) => ({ key, label, seconds: timing.phases?.[key] ?? null }));
  const steps = timing.steps?.length ? timing.steps : [{ step_id: null, ...Object.fromEntries(STEP_PHASES.map((p) => [p, timing.phases?.[p] ?? null])) }];
  for (const step of steps) {
    const prefix = step.step_id === null || step.step_id === undefined ? 'Steps' : `Step ${step.step_id}`;
    for (const phase of STEP_PHASES) rows.push({ key: phase, label: `${prefix} · ${phase}`, seconds: step[phase] ?? null, step: step.step_id });
  }
  return rows;
}

export function renderTiming(timing) {
  if (!timing) return emptyState('No timing yet: it appears once the job has been submitted and makes progress.', 'timing-empty');
  const rows = timingRows(timing);
  const sum = rows.reduce((acc, r) => acc + (r.seconds ?? 0), 0);
  const scale = Math.max(timing.total ?? 0, sum, 1e-9);
  let offset = 0;
  const bars = rows.map((row) => {
    const start = offset;
    offset += row.seconds ?? 0;
    const known = row.seconds !== null;
    return h(
      'li',
      { class: `wf-row${known ? '' : ' wf-missing'}`, testid: 'timing-bar', 'data-phase': row.key },
      h('span', { class: 'wf-label' }, row.label),
      h('span', { class: 'wf-track', 'aria-hidden': 'true' },
        known ? h('span', {
          class: `wf-bar ${row.key === 'run' ? 'wf-run' : 'wf-overhead'}`,
          style: { left: `${(100 * start) / scale}%`, width: `max(2px, ${(100 * row.seconds) / scale}%)` },
        }) : null),
      h('span', { class: 'wf-value' }, known ? formatSeconds(row.seconds) : 'not reached'),
    );
  });
  const pct = timing.overhead_pct;
  return h(
    'div',
    { class: 'timing' },
    h('dl', { class: 'timing-summary' },
      h('div', { class: 'field' }, h('dt', {}, 'Total'), h('dd', { testid: 'timing-total' }, formatSeconds(timing.total))),
      h('div', { class: 'field' }, h('dt', {}, 'Overhead'),
        h('dd', { testid: 'timing-overhead' }, `${formatSeconds(timing.overhead)}${pct === null || pct === undefined ? '' : ` (${pct}%)`}`)),
      h('div', { class: 'field' }, h('dt', {}, 'Legend'),
        h('dd', { class: 'legend' }, h('span', { class: 'swatch wf-run' }), 'your steps running ', h('span', { class: 'swatch wf-overhead' }), 'overhead'))),
    h('ol', { class: 'waterfall', 'aria-label': 'Phases in order, with their durations' }, bars),
  );
}
