// The Hades dashboard: boot, session, routing between views. Loaded as an ES module by index.html.

import { onUnauthorized, request } from './js/api.js';
import { LiveFeed } from './js/feed.js';
import { Router } from './js/router.js';
import { Shell } from './js/shell.js';
import { initTheme } from './js/theme.js';
import { mountJob } from './js/views/job.js';
import { mountJobs } from './js/views/jobs.js';
import { mountLogin } from './js/views/login.js';
import { mountOverview } from './js/views/overview.js';

const VIEWS = { login: mountLogin, overview: mountOverview, jobs: mountJobs, job: mountJob };
const TITLES = { login: 'Sign in', overview: 'Overview', jobs: 'Jobs', job: 'Job' };

const app = {
  session: null,
  configured: true,
  feed: new LiveFeed(),
  unmount: null,
  rendered: false,
};

const main = document.getElementById('main');
const router = new Router(render);
const shell = new Shell(document.getElementById('shell-header'), { onLogout: logout });
app.feed.on('state', (state) => shell.setLive(state));

function here() {
  return location.pathname + location.search + location.hash;
}

/** Only local paths, never ``//elsewhere``. */
function safeNext(next) {
  return next && next.startsWith('/') && !next.startsWith('//') && !next.startsWith('/login') ? next : '/';
}

function setSession(session) {
  app.session = session;
  shell.setSession(session);
  if (session) app.feed.start();
  else app.feed.stop();
}

function toLogin() {
  const next = location.pathname === '/login' ? '' : `?next=${encodeURIComponent(here())}`;
  setSession(null);
  router.go(`/login${next}`, { replace: true });
}

async function logout() {
  await request('/api/logout', { method: 'POST' }).catch(() => null);
  setSession(null);
  router.go('/login');
}

function render(route) {
  if (route.name !== 'login' && !app.session) {
    toLogin();
    return;
  }
  if (route.name === 'login' && app.session) {
    router.go(safeNext(new URLSearchParams(location.search).get('next')), { replace: true });
    return;
  }
  app.unmount?.();
  app.unmount = null;
  shell.show(route.name);
  main.replaceChildren();
  document.title = `${TITLES[route.name]} · Hades`;
  const context = {
    params: route.params,
    feed: app.feed,
    router,
    session: app.session,
    configured: app.configured,
    onLogin: (session) => {
      setSession(session);
      router.go(safeNext(new URLSearchParams(location.search).get('next')), { replace: true });
    },
  };
  app.unmount = VIEWS[route.name](main, context) ?? null;
  if (app.rendered) {
    window.scrollTo(0, 0);
    main.focus({ preventScroll: true });
  }
  app.rendered = true;
}

async function boot() {
  initTheme();
  onUnauthorized(() => {
    if (location.pathname !== '/login' || app.session) toLogin();
  });
  const answer = await request('/api/session').catch(() => null);
  if (answer?.ok) setSession(answer.data);
  else if (answer?.status === 503) app.configured = false;
  router.start();
  document.body.dataset.ready = 'true';
}

boot();
