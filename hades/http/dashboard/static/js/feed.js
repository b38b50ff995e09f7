// The /api/stream feed: one EventSource for the whole app. Job frames are batched per animation frame (the
// last summary of a job wins), so a burst of thousands of updates costs one render; metrics frames pass
// straight through. ``state`` is 'live' while frames flow and 'offline' otherwise, which drives the header
// indicator and the views' polling fallback.

import { request, sessionLost } from './api.js';
import { frameScheduler } from './dom.js';

const RETRY_MS = 3000;
const STALE_MS = 30000; // metrics arrive every 5 s and pings every 25 s; silence this long means a dead link

export class LiveFeed {
  constructor(url = '/api/stream') {
    this.url = url;
    this.state = 'offline';
    this.metrics = null;
    this.source = null;
    this.stopped = true;
    this.retry = 0;
    this.lastFrameAt = 0;
    this.pending = new Map();
    this.listeners = { job: new Set(), metrics: new Set(), state: new Set(), resync: new Set() };
    this.flush = frameScheduler(() => this.flushNow());
  }

  /** Subscribe to 'job' (an array of summaries), 'metrics', 'state' or 'resync'; returns the unsubscribe function. */
  on(kind, fn) {
    this.listeners[kind].add(fn);
    return () => this.listeners[kind].delete(fn);
  }

  /** ``fn`` whenever what a view shows may be stale: the feed came back live (later than a moment after now),
   * or the server dropped frames for this client and said so with a ``resync`` frame. */
  onStale(fn, graceMs = 2000) {
    const since = Date.now();
    const offState = this.on('state', (state) => state === 'live' && Date.now() - since > graceMs && fn());
    const offResync = this.on('resync', fn);
    return () => {
      offState();
      offResync();
    };
  }

  get live() {
    return this.state === 'live';
  }

  start() {
    if (!this.stopped) return;
    this.stopped = false;
    this.connect();
    this.watchdog = setInterval(() => this.checkStale(), 5000);
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.retry);
    clearInterval(this.watchdog);
    this.source?.close();
    this.source = null;
    this.setState('offline');
  }

  connect() {
    if (this.stopped) return;
    const source = new EventSource(this.url);
    this.source = source;
    source.onopen = () => {
      this.lastFrameAt = Date.now();
      this.setState('live');
    };
    source.onmessage = (event) => this.receive(event.data);
    source.onerror = () => {
      this.setState('offline');
      // CONNECTING: the browser retries by itself. CLOSED: the server refused (401, 503); check why, then retry.
      if (source.readyState === EventSource.CLOSED) this.reconnectLater();
    };
  }

  reconnectLater() {
    this.source?.close();
    this.source = null;
    clearTimeout(this.retry);
    this.retry = setTimeout(async () => {
      if (this.stopped) return;
      const answer = await request('/api/session').catch(() => null);
      if (answer?.status === 401) {
        sessionLost();
        return;
      }
      this.connect();
    }, RETRY_MS);
  }

  checkStale() {
    if (this.live && Date.now() - this.lastFrameAt > STALE_MS) {
      this.setState('offline');
      this.reconnectLater();
    }
  }

  receive(text) {
    this.lastFrameAt = Date.now();
    if (!this.live) this.setState('live');
    let frame;
    try {
      frame = JSON.parse(text);
    } catch {
      return;
    }
    if (frame.type === 'job' && frame.job?.id) {
      this.pending.set(frame.job.id, frame.job);
      this.flush();
    } else if (frame.type === 'metrics' && frame.metrics) {
      this.metrics = frame.metrics;
      this.emit('metrics', frame.metrics);
    } else if (frame.type === 'resync') {
      this.flushNow(); // the frames read before it are older than what the views are about to refetch
      this.emit('resync', null);
    }
  }

  flushNow() {
    const jobs = [...this.pending.values()];
    this.pending.clear();
    if (jobs.length) this.emit('job', jobs);
  }

  setState(state) {
    if (state === this.state) return;
    this.state = state;
    this.emit('state', state);
  }

  emit(kind, value) {
    for (const fn of [...this.listeners[kind]]) {
      try {
        fn(value);
      } catch (error) {
        console.error(error);
      }
    }
  }
}
