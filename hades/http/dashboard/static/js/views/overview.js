// Overview: four metric cards, jobs by status, the 8 most recent jobs. Live from /api/stream; polls every 15 s
// only while the stream is offline.

import { getJSON } from '../api.js';
import { emptyState, notice } from '../components.js';
import { fill, h, setText } from '../dom.js';
import { formatCount, formatDuration, sortByRecency, STATUSES } from '../format.js';
import { createJobRow, fillJobRow, jobHeaderRow } from '../jobrow.js';

const RECENT = 8;
const POLL_MS = 15000;

function metricCard(key, label) {
  const value = h('div', { class: 'metric-value', testid: `metric-${key}` }, '—');
  const sub = h('div', { class: 'metric-sub', testid: `metric-${key}-sub` });
  const card = h('article', { class: 'card metric', 'aria-label': label }, h('h2', { class: 'metric-label' }, label), value, sub);
  return { card, value, sub };
}

function statusChart() {
  const rows = {};
  const list = h('ul', { class: 'bars', testid: 'status-chart', 'aria-label': 'Jobs by status' });
  for (const status of STATUSES) {
    const bar = h('span', { class: `bar-fill fill-${status.toLowerCase()}` });
    const count = h('span', { class: 'bar-count' }, '0');
    list.append(
      h('li', { class: 'bar-row', testid: 'status-bar', 'data-status': status },
        h('span', { class: 'bar-label' }, status), h('span', { class: 'bar-track', 'aria-hidden': 'true' }, bar), count),
    );
    rows[status] = { bar, count };
  }
  return {
    el: list,
    update(counts) {
      const values = STATUSES.map((s) => counts?.[s] ?? 0);
      const max = Math.max(1, ...values);
      STATUSES.forEach((status, i) => {
        rows[status].bar.style.width = values[i] ? `max(3px, ${(100 * values[i]) / max}%)` : '0';
        setText(rows[status].count, formatCount(values[i]));
      });
    },
  };
}

export function mountOverview(root, { feed, router }) {
  const cards = {
    queued: metricCard('queued', 'Queued'),
    running: metricCard('running', 'Running'),
    throughput: metricCard('throughput', 'Throughput'),
    duration: metricCard('duration', 'Avg duration'),
  };
  const chart = statusChart();
  const error = h('div', { class: 'view-error' });
  const recentBody = h('div', { class: 'vbody static', role: 'rowgroup', testid: 'recent-jobs' });
  let recent = new Map();

  root.append(
    h('section', { class: 'view overview', 'aria-labelledby': 'overview-title' },
      h('div', { class: 'view-head' }, h('h1', { id: 'overview-title' }, 'Overview')),
      error,
      h('div', { class: 'metrics' }, Object.values(cards).map((c) => c.card)),
      h('div', { class: 'overview-grid' },
        h('section', { class: 'card', 'aria-labelledby': 'chart-title' }, h('h2', { id: 'chart-title' }, 'Jobs by status'), chart.el),
        h('section', { class: 'card recent', 'aria-labelledby': 'recent-title' },
          h('div', { class: 'card-head' }, h('h2', { id: 'recent-title' }, 'Recent jobs'), h('a', { href: '/jobs', class: 'more' }, 'All jobs →')),
          h('div', { class: 'vtable compact', role: 'table', 'aria-labelledby': 'recent-title' },
            h('div', { role: 'rowgroup' }, jobHeaderRow()), recentBody))),
    ),
  );

  function showMetrics(m) {
    const depth = m.queueDepth ?? {};
    setText(cards.queued.value, formatCount(depth.total ?? 0));
    const by = depth.byPriority ?? {};
    setText(cards.queued.sub, `high ${by.high ?? 0} · medium ${by.medium ?? 0} · low ${by.low ?? 0}${depth.approximate ? ' · approximate' : ''}`);
    setText(cards.running.value, formatCount(m.statusCounts?.Running ?? 0));
    const tracked = Object.values(m.statusCounts ?? {}).reduce((a, b) => a + b, 0);
    setText(cards.running.sub, `of ${formatCount(tracked)} tracked jobs`);
    setText(cards.throughput.value, `${formatCount(m.throughputPerMin ?? 0)}/min`);
    setText(cards.throughput.sub, 'jobs finished in the last minute');
    const d = m.durations ?? {};
    setText(cards.duration.value, d.count ? formatDuration(d.avgMs) : '—');
    setText(cards.duration.sub, `p95 ${d.count ? formatDuration(d.p95Ms) : '—'} · n=${formatCount(d.count ?? 0)}`);
    chart.update(m.statusCounts);
  }

  function showRecent() {
    const jobs = sortByRecency([...recent.values()]).slice(0, RECENT);
    recent = new Map(jobs.map((j) => [j.id, j]));
    const now = Date.now();
    fill(recentBody, jobs.length ? jobs.map((job) => {
      const row = createJobRow('recent-row');
      fillJobRow(row, job, now);
      return row;
    }) : emptyState('No jobs yet. Submit one with POST /build.', 'recent-empty'));
  }

  recentBody.addEventListener('click', (event) => {
    const row = event.target.closest('.vrow');
    if (row && !event.target.closest('a')) router.go(`/jobs/${encodeURIComponent(row.dataset.jobId)}`);
  });

  // a job frame means the counts moved: refresh them now rather than at the next 5 s metrics frame
  let metricsTimer = 0;
  function refreshMetricsSoon() {
    if (metricsTimer) return;
    metricsTimer = setTimeout(async () => {
      try {
        showMetrics(await getJSON('/api/metrics'));
      } catch {
        // the next metrics frame or poll will do
      } finally {
        metricsTimer = 0;
      }
    }, 1000);
  }

  async function load() {
    try {
      const [metrics, list] = await Promise.all([getJSON('/api/metrics'), getJSON(`/api/jobs?limit=${RECENT}`)]);
      showMetrics(metrics);
      recent = new Map(list.jobs.map((j) => [j.id, j]));
      showRecent();
      fill(error);
    } catch (e) {
      if (e.status !== 401) fill(error, notice('danger', `Could not load the overview: ${e.message}`, 'overview-error'));
    }
  }

  if (feed.metrics) showMetrics(feed.metrics);
  load();
  const off = [
    feed.on('metrics', showMetrics),
    feed.on('job', (jobs) => {
      for (const job of jobs) recent.set(job.id, job);
      showRecent();
      refreshMetricsSoon();
    }),
    feed.onStale(load),
  ];
  const poll = setInterval(() => feed.live || load(), POLL_MS);
  const tick = setInterval(showRecent, 10000);
  return () => {
    off.forEach((f) => f());
    clearInterval(poll);
    clearInterval(tick);
    clearTimeout(metricsTimer);
  };
}
