// The Logs tab: live over SSE while the job is Queued or Running, else one snapshot. Lines are de-duplicated
// by timestamp + stream + message, the cache is reset on every (re)connect, and only the last 2000 render.

import { getJSON, jobPath, request, sessionLost } from '../api.js';
import { notice } from '../components.js';
import { fill, frameScheduler, h, setText } from '../dom.js';
import { ACTIVE_STATUSES, formatClock, formatCount } from '../format.js';

export const MAX_LINES = 2000;
const WARNING = 'Logs are shown verbatim and may contain secrets Hades does not scrub.';
const END_GRACE_MS = 8000;

export class LogPanel {
  constructor(jobId, { onEnd }) {
    this.jobId = jobId;
    this.onEnd = onEnd;
    this.source = null;
    this.mode = 'idle'; // idle | connecting | live | snapshot | ended
    this.lines = [];
    this.seen = new Set();
    this.rendered = 0; // how many of this.lines are in the DOM (counting from the end)
    this.retry = 0;
    this.state = h('span', { class: 'logs-state', testid: 'logs-state', 'data-mode': 'idle' }, 'Waiting for the job…');
    this.count = h('span', { class: 'muted', testid: 'logs-count' });
    this.view = h('div', { class: 'log-view', testid: 'log-view', role: 'log', 'aria-label': 'Job logs', tabindex: 0 });
    this.error = h('div', {});
    this.el = h('div', { class: 'logs' },
      notice('warning', WARNING, 'logs-warning'),
      h('div', { class: 'logs-bar' }, this.state, this.count),
      this.error,
      this.view);
    this.paint = frameScheduler(() => this.render());
  }

  /** Follow the job's status: stream while it is active, one snapshot once it has ended. */
  sync(status) {
    if (ACTIVE_STATUSES.has(status)) {
      if (!this.source && this.mode !== 'ended') this.stream();
    } else if (status && status !== 'Unknown') {
      if (this.source) {
        // the stream sends "end" once every log was sent; if it never comes, fall back to a snapshot
        clearTimeout(this.endTimer);
        this.endTimer = setTimeout(() => this.source && this.snapshot(), END_GRACE_MS);
      } else if (this.mode === 'idle') this.snapshot();
    }
  }

  stream() {
    this.setMode('connecting', 'Connecting to the live log stream…');
    const source = new EventSource(jobPath(this.jobId, '/logs/stream'));
    this.source = source;
    source.onopen = () => {
      this.reset();
      this.setMode('live', 'Live: streaming as the job writes');
    };
    source.onmessage = (event) => this.receive(event.data);
    source.onerror = () => {
      if (this.source !== source) return;
      this.setMode('connecting', 'Reconnecting to the live log stream…');
      if (source.readyState === EventSource.CLOSED) {
        this.source = null;
        source.close();
        clearTimeout(this.retry);
        this.retry = setTimeout(() => this.recover(), 3000);
      }
    };
  }

  async recover() {
    const answer = await request('/api/session').catch(() => null);
    if (answer?.status === 401) sessionLost();
    else if (this.mode !== 'ended' && this.mode !== 'closed') this.stream();
  }

  receive(text) {
    let frame;
    try {
      frame = JSON.parse(text);
    } catch {
      return;
    }
    if (frame.type === 'log' && frame.log) this.add(frame.log.logs ?? []);
    else if (frame.type === 'end') {
      this.stop();
      this.setMode('ended', `Stream ended: the job ${frame.job?.status ? `is ${frame.job.status}` : 'has ended'}.`);
      this.onEnd?.(frame.job?.status);
    }
  }

  async snapshot() {
    this.stop();
    this.setMode('connecting', 'Loading logs…');
    try {
      const data = await getJSON(jobPath(this.jobId, '/logs'));
      this.reset();
      for (const log of data.logs ?? []) this.add(log.logs ?? []);
      this.setMode('snapshot', 'Snapshot: the job has ended.');
    } catch (e) {
      if (e.status === 401) return;
      this.setMode('snapshot', 'No logs.');
      fill(this.error, notice('danger', `Could not load logs: ${e.message}`, 'logs-error'));
    }
  }

  add(entries) {
    let added = false;
    for (const entry of entries) {
      const key = `${entry.timestamp}\u0000${entry.output_stream}\u0000${entry.message}`;
      if (this.seen.has(key)) continue;
      this.seen.add(key);
      this.lines.push(entry);
      added = true;
    }
    if (added) this.paint();
  }

  reset() {
    this.lines = [];
    this.seen = new Set();
    this.rendered = 0;
    this.view.replaceChildren();
    fill(this.error);
    this.paint();
  }

  render() {
    const view = this.view;
    const atBottom = view.scrollHeight - view.scrollTop - view.clientHeight < 40;
    const fresh = this.lines.length - this.rendered;
    const start = Math.max(this.rendered, this.lines.length - MAX_LINES);
    const fragment = document.createDocumentFragment();
    for (let i = start; i < this.lines.length; i += 1) fragment.append(this.line(this.lines[i]));
    view.append(fragment);
    this.rendered = this.lines.length;
    while (view.childElementCount > MAX_LINES) view.firstElementChild.remove();
    const total = this.lines.length;
    setText(this.count, total > MAX_LINES ? `${formatCount(total)} lines, showing the last ${formatCount(MAX_LINES)}` : `${formatCount(total)} ${total === 1 ? 'line' : 'lines'}`);
    if (total === 0 && !view.firstChild) view.append(h('p', { class: 'muted log-empty' }, 'No output yet.'));
    else view.querySelector('.log-empty')?.remove();
    if (atBottom && fresh > 0) view.scrollTop = view.scrollHeight;
  }

  line(entry) {
    const stream = entry.output_stream === 'stderr' ? 'stderr' : 'stdout';
    return h('div', { class: `log-line log-${stream}`, testid: 'log-line', 'data-stream': stream },
      h('span', { class: 'log-time', title: entry.timestamp ?? '' }, formatClock(entry.timestamp)),
      h('span', { class: 'log-msg' }, entry.message ?? ''));
  }

  setMode(mode, text) {
    this.mode = mode;
    this.state.dataset.mode = mode;
    setText(this.state, text);
  }

  stop() {
    clearTimeout(this.retry);
    clearTimeout(this.endTimer);
    this.source?.close();
    this.source = null;
  }

  destroy() {
    this.stop();
    this.mode = 'closed';
  }
}
