// Client-side routing with history.pushState: /login, / (overview), /jobs, /jobs/:id; anything else → /.

const ROUTES = [
  { name: 'login', pattern: /^\/login\/?$/ },
  { name: 'overview', pattern: /^\/$/ },
  { name: 'jobs', pattern: /^\/jobs\/?$/ },
  { name: 'job', pattern: /^\/jobs\/([^/]+)\/?$/, params: (m) => ({ id: decodeURIComponent(m[1]) }) },
];

/** The route for a path, or null. */
export function matchRoute(pathname) {
  for (const route of ROUTES) {
    const m = route.pattern.exec(pathname);
    if (m) return { name: route.name, params: route.params ? route.params(m) : {} };
  }
  return null;
}

export class Router {
  /** ``render(route)`` is called on every navigation, including the first. */
  constructor(render) {
    this.render = render;
  }

  start() {
    window.addEventListener('popstate', () => this.resolve());
    document.addEventListener('click', (event) => this.intercept(event));
    this.resolve();
  }

  /** Navigate without a reload; ``replace`` keeps the history length. */
  go(path, { replace = false } = {}) {
    const current = location.pathname + location.search + location.hash;
    if (path !== current) history[replace ? 'replaceState' : 'pushState'](null, '', path);
    this.resolve();
  }

  resolve() {
    const route = matchRoute(location.pathname);
    if (route === null) {
      history.replaceState(null, '', '/');
      this.resolve();
      return;
    }
    this.render(route);
  }

  /** Same-origin links become client-side navigations (plain left clicks only). */
  intercept(event) {
    if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) {
      return;
    }
    const link = event.target.closest?.('a[href]');
    if (!link || link.target || link.hasAttribute('download') || link.origin !== location.origin) return;
    if (link.pathname.startsWith('/api/') || link.pathname.startsWith('/static/')) return;
    if (link.pathname === location.pathname && link.hash) return; // in-page anchors (skip link)
    event.preventDefault();
    this.go(link.pathname + link.search + link.hash);
  }
}
