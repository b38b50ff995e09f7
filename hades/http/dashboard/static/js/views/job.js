// A job's page: header, times, cancel, and the tabs. Refetches the detail on every /api/stream frame for the
// job (showing the frame's status at once), and every 10 s while the stream is offline.

import { getJSON, jobPath } from '../api.js';
import { field, notice, statusBadge, toast, updateStatusBadge } from '../components.js';
import { fill, h, setText } from '../dom.js';
import { ACTIVE_STATUSES, formatDateTime, formatDuration, jobDurationMs, shortId } from '../format.js';
import { confirmCancel } from './job-cancel.js';
import { DeliveriesPanel } from './job-deliveries.js';
import { LogPanel } from './job-logs.js';
import { renderMetadata, renderSteps } from './job-steps.js';
import { TimelinePanel } from './job-timeline.js';
import { renderTiming } from './job-timing.js';

const POLL_MS = 10000;
const TABS = [
  ['steps', 'Steps'],
  ['metadata', 'Metadata'],
  ['logs', 'Logs'],
  ['timeline', 'Timeline'],
  ['timing', 'Timing'],
  ['deliveries', 'Deliveries'],
];

function tabs(onSelect) {
  const list = h('div', { class: 'tabs', role: 'tablist', 'aria-label': 'Job details' });
  const buttons = {};
  const panels = {};
  for (const [key, label] of TABS) {
    buttons[key] = h('button', {
      type: 'button', role: 'tab', id: `tab-${key}`, class: 'tab', testid: `tab-${key}`, 'aria-controls': `panel-${key}`,
      'aria-selected': 'false', tabindex: -1, on: { click: () => onSelect(key) },
    }, label);
    panels[key] = h('section', { role: 'tabpanel', id: `panel-${key}`, class: 'tab-panel', testid: `panel-${key}`, 'aria-labelledby': `tab-${key}`, hidden: true, tabindex: 0 });
    list.append(buttons[key]);
  }
  list.addEventListener('keydown', (event) => {
    const keys = TABS.map(([k]) => k);
    const at = keys.indexOf(event.target.id.replace('tab-', ''));
    const move = { ArrowRight: 1, ArrowLeft: -1, Home: -at, End: keys.length - 1 - at }[event.key];
    if (move === undefined || at < 0) return;
    event.preventDefault();
    const next = keys[(at + move + keys.length) % keys.length];
    onSelect(next);
    buttons[next].focus();
  });
  return { list, buttons, panels };
}

export function mountJob(root, { params, feed }) {
  const id = params.id;
  let detail = null;
  let active = null;
  let disposed = false;

  const name = h('h1', { class: 'job-name', testid: 'job-name' }, 'Loading…');
  const badge = statusBadge('Unknown', 'job-status');
  const cancel = h('button', { type: 'button', class: 'btn btn-danger', testid: 'cancel-button', hidden: true, on: { click: () => askCancel() } }, 'Cancel job');
  const meta = {
    id: h('code', { testid: 'job-id' }, id),
    priority: h('span', { testid: 'job-priority' }, '—'),
    duration: h('span', { testid: 'job-duration' }, '—'),
    attempt: h('span', { testid: 'job-attempt' }, '—'),
    executor: h('span', { testid: 'job-executor' }, '—'),
    queued: h('span', { testid: 'job-queued-at' }, '—'),
    started: h('span', { testid: 'job-started-at' }, '—'),
    finished: h('span', { testid: 'job-finished-at' }, '—'),
  };
  const banner = h('div', { class: 'banner banner-danger', role: 'alert', testid: 'job-reason', hidden: true });
  const info = h('div', {});
  const error = h('div', { class: 'view-error' });
  const cancelNote = h('p', { class: 'muted', testid: 'cancel-requested', hidden: true });
  const tabset = tabs(select);
  const logs = new LogPanel(id, { onEnd: () => refetch() });
  const timeline = new TimelinePanel(id);
  const deliveries = new DeliveriesPanel(id);
  tabset.panels.logs.append(logs.el);
  tabset.panels.timeline.append(timeline.el);
  tabset.panels.deliveries.append(deliveries.el);

  root.append(h('article', { class: 'view job', 'aria-labelledby': 'job-title-name' },
    h('nav', { class: 'breadcrumb', 'aria-label': 'Breadcrumb' }, h('a', { href: '/jobs' }, 'Jobs'), h('span', { 'aria-hidden': 'true' }, ' / '), h('span', { testid: 'crumb-id' }, shortId(id))),
    h('header', { class: 'job-head' },
      h('div', { class: 'job-title' }, name, badge),
      h('div', { class: 'job-actions' }, cancel)),
    error,
    banner,
    info,
    h('div', { class: 'card job-facts' },
      h('dl', { class: 'facts' },
        field('ID', meta.id), field('Priority', meta.priority), field('Duration', meta.duration),
        field('Attempt', meta.attempt), field('Executor', meta.executor)),
      h('dl', { class: 'facts' }, field('Queued', meta.queued), field('Started', meta.started), field('Finished', meta.finished)),
      cancelNote),
    tabset.list,
    Object.values(tabset.panels)));
  name.id = 'job-title-name';

  function showHeader(job) {
    setText(name, job.name || (job.status === 'Unknown' ? 'Unknown job' : '(unnamed job)'));
    document.title = `${job.name || shortId(id)} · Hades`;
    updateStatusBadge(badge, job.status);
    setText(meta.priority, job.priority ?? '—');
    setText(meta.attempt, job.attempt ?? '—');
    setText(meta.executor, job.executorId ?? '—');
    setText(meta.duration, formatDuration(jobDurationMs(job, Date.now())));
    setText(meta.queued, formatDateTime(job.queuedAt));
    setText(meta.started, formatDateTime(job.startedAt));
    setText(meta.finished, formatDateTime(job.finishedAt));
    setText(banner, job.reason ?? '');
    banner.hidden = !job.reason;
    banner.className = `banner ${job.status === 'Failed' || job.status === 'Stopped' ? 'banner-danger' : 'banner-info'}`;
    cancel.hidden = !ACTIVE_STATUSES.has(job.status);
    cancel.disabled = Boolean(job.cancelRequestedBy);
    setText(cancel, job.cancelRequestedBy ? 'Cancelling…' : 'Cancel job');
    cancelNote.hidden = !job.cancelRequestedBy;
    setText(cancelNote, job.cancelRequestedBy ? `Cancel requested by ${job.cancelRequestedBy}.` : '');
  }

  function show(job) {
    detail = job;
    showHeader(job);
    fill(info,
      job.status === 'Unknown' ? notice('info', 'Hades does not know this job (yet). This page updates when it appears.', 'job-unknown') : null,
      job.payloadAvailable === false && job.status !== 'Unknown' ? notice('info', "The job's payload is no longer available: steps and metadata are unknown.", 'payload-missing') : null);
    fill(tabset.panels.steps, renderSteps(job));
    fill(tabset.panels.metadata, renderMetadata(job));
    fill(tabset.panels.timing, renderTiming(job.timing));
    logs.sync(job.status);
    if (active === 'timeline') timeline.load();
    if (active === 'deliveries') deliveries.load();
    root.querySelector('.job')?.setAttribute('data-status', job.status);
  }

  let inflight = false;
  let again = false;
  async function refetch() {
    if (inflight) {
      again = true;
      return;
    }
    inflight = true;
    try {
      const job = await getJSON(jobPath(id));
      if (!disposed) {
        show(job);
        fill(error);
      }
    } catch (e) {
      if (!disposed && e.status !== 401) fill(error, notice('danger', `Could not load the job: ${e.message}`, 'job-error'));
    } finally {
      inflight = false;
      if (again && !disposed) {
        again = false;
        refetch();
      }
    }
  }

  function select(key) {
    active = key;
    for (const [k] of TABS) {
      const on = k === key;
      tabset.buttons[k].setAttribute('aria-selected', String(on));
      tabset.buttons[k].tabIndex = on ? 0 : -1;
      tabset.panels[k].hidden = !on;
    }
    history.replaceState(null, '', `${location.pathname}${location.search}#${key}`);
    if (key === 'timeline') timeline.load();
    if (key === 'deliveries') deliveries.load();
  }

  function askCancel() {
    if (!detail) return;
    confirmCancel(detail, (answer) => {
      if (answer.status === 409) toast(`The job already ended (${answer.data?.status ?? 'ended'}).`, 'warning');
      else toast('Cancel requested.', 'info');
      refetch();
    });
  }

  const initialTab = location.hash.slice(1);
  select(TABS.some(([k]) => k === initialTab) ? initialTab : 'steps');
  refetch();

  const off = [
    feed.on('job', (jobs) => {
      const frame = jobs.find((j) => j.id === id);
      if (!frame) return;
      if (detail) showHeader({ ...detail, ...frame });
      refetch();
    }),
    feed.onStale(refetch),
  ];
  const poll = setInterval(() => feed.live || refetch(), POLL_MS);
  const tick = setInterval(() => detail?.status === 'Running' && setText(meta.duration, formatDuration(jobDurationMs(detail, Date.now()))), 1000);
  return () => {
    disposed = true;
    off.forEach((f) => f());
    clearInterval(poll);
    clearInterval(tick);
    logs.destroy();
    timeline.destroy();
    document.querySelector('dialog.dialog')?.close();
  };
}
