// The header: brand, navigation, version, the Live/Offline indicator of /api/stream, theme toggle, logout.

import { h, setText } from './dom.js';
import { versionLabel } from './format.js';
import { currentTheme, toggleTheme } from './theme.js';

export class Shell {
  constructor(root, { onLogout }) {
    this.root = root;
    this.links = {
      overview: h('a', { href: '/', class: 'nav-link', testid: 'nav-overview' }, 'Overview'),
      jobs: h('a', { href: '/jobs', class: 'nav-link', testid: 'nav-jobs' }, 'Jobs'),
    };
    this.version = h('span', { class: 'version', testid: 'version', title: 'Hades version' });
    this.liveText = h('span', {}, 'Offline');
    this.live = h(
      'span',
      { class: 'live', testid: 'live-indicator', 'data-state': 'offline', role: 'status', title: 'Live updates from /api/stream' },
      h('span', { class: 'live-dot', 'aria-hidden': 'true' }),
      this.liveText,
    );
    this.themeButton = h('button', {
      type: 'button',
      class: 'btn btn-ghost btn-icon',
      testid: 'theme-toggle',
      on: { click: () => this.showTheme(toggleTheme()) },
    });
    this.user = h('span', { class: 'user', testid: 'current-user' });
    this.logout = h('button', { type: 'button', class: 'btn btn-ghost', testid: 'logout', on: { click: onLogout } }, 'Log out');
    root.append(
      h(
        'div',
        { class: 'topbar-inner' },
        h('a', { href: '/', class: 'brand', 'aria-label': 'Hades dashboard home' },
          h('img', { src: '/static/favicon.svg', alt: '', width: 22, height: 22 }), h('span', {}, 'Hades')),
        h('nav', { 'aria-label': 'Main' }, this.links.overview, this.links.jobs),
        h('div', { class: 'topbar-right' }, this.version, this.live, this.themeButton, this.user, this.logout),
      ),
    );
    this.showTheme(currentTheme());
  }

  showTheme(theme) {
    const next = theme === 'dark' ? 'light' : 'dark';
    setText(this.themeButton, theme === 'dark' ? '☀' : '☾');
    this.themeButton.setAttribute('aria-label', `Switch to ${next} theme`);
    this.themeButton.title = `Switch to ${next} theme`;
    this.themeButton.dataset.theme = theme;
  }

  setSession(session) {
    setText(this.version, versionLabel(session?.version ?? ''));
    setText(this.user, session?.username ?? '');
  }

  setLive(state) {
    this.live.dataset.state = state;
    setText(this.liveText, state === 'live' ? 'Live' : 'Offline');
  }

  show(routeName) {
    this.root.hidden = routeName === 'login';
    for (const [name, link] of Object.entries(this.links)) {
      const current = name === routeName || (name === 'jobs' && routeName === 'job');
      if (current) link.setAttribute('aria-current', 'page');
      else link.removeAttribute('aria-current');
    }
  }
}
