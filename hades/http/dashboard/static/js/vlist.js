// A windowed table: however many rows it holds, only the ones in view (plus a margin) exist in the DOM.
// Rows have a fixed height and are positioned with transforms; row elements are recycled while scrolling.

import { h, frameScheduler } from './dom.js';

export class VirtualTable {
  /**
   * @param {object} o
   * @param {string} o.label accessible name of the table
   * @param {HTMLElement} o.header the header row
   * @param {(testid: string) => HTMLElement} o.createRow an empty row
   * @param {(row: HTMLElement, item: object, now: number) => void} o.fillRow
   * @param {(item: object) => void} o.onActivate a row was clicked or Enter was pressed on it
   */
  constructor({ label, header, createRow, fillRow, onActivate, rowHeight = 44, overscan = 10, testid, rowTestid, empty }) {
    Object.assign(this, { createRow, fillRow, onActivate, rowHeight, overscan, rowTestid });
    this.items = [];
    this.byKey = new Map();
    this.live = new Map();
    this.pool = [];
    this.stale = false;
    this.header = header;
    this.body = h('div', { class: 'vbody', role: 'rowgroup' });
    this.empty = h('div', { class: 'empty', testid: `${testid}-empty`, hidden: true }, empty ?? 'Nothing to show.');
    this.scroller = h('div', { class: 'vscroll' }, h('div', { class: 'vhead-group', role: 'rowgroup' }, header), this.body, this.empty);
    this.el = h('div', { class: 'vtable', role: 'table', 'aria-label': label, testid }, this.scroller);
    this.schedule = frameScheduler(() => this.render());
    this.scroller.addEventListener('scroll', this.schedule, { passive: true });
    this.body.addEventListener('click', (event) => this.activate(event));
    this.body.addEventListener('keydown', (event) => {
      if (event.key === 'Enter' && event.target.classList?.contains('vrow')) this.activate(event);
    });
    this.resize = new ResizeObserver(this.schedule);
    this.resize.observe(this.scroller);
  }

  /** Show these items (each with a unique ``id``), in this order. */
  setItems(items) {
    this.items = items;
    this.byKey = new Map(items.map((item) => [item.id, item]));
    this.schedule();
  }

  /** Re-fill every visible row (relative times go stale). */
  refresh() {
    this.stale = true;
    this.schedule();
  }

  destroy() {
    this.resize.disconnect();
  }

  activate(event) {
    if (event.target.closest('a')) return; // the link navigates by itself
    const row = event.target.closest('.vrow');
    const item = row && this.byKey.get(row.dataset.jobId);
    if (item) this.onActivate(item);
  }

  render() {
    const { items, rowHeight, overscan } = this;
    const count = items.length;
    this.body.style.height = `${count * rowHeight}px`;
    this.el.setAttribute('aria-rowcount', String(count + 1));
    this.empty.hidden = count > 0;
    const top = Math.max(0, this.scroller.scrollTop - this.header.offsetHeight);
    const height = this.scroller.clientHeight || window.innerHeight;
    const first = Math.max(0, Math.floor(top / rowHeight) - overscan);
    const last = Math.min(count, Math.ceil((top + height) / rowHeight) + overscan);
    const now = Date.now();
    const next = new Map();
    for (let index = first; index < last; index += 1) {
      const item = items[index];
      let row = this.live.get(item.id);
      if (row) this.live.delete(item.id);
      else {
        row = this.pool.pop() ?? this.newRow();
        row._item = null;
        this.body.append(row);
      }
      if (row._item !== item || this.stale) {
        this.fillRow(row, item, now);
        row._item = item;
      }
      if (row._index !== index) {
        row.style.transform = `translateY(${index * rowHeight}px)`;
        row.setAttribute('aria-rowindex', String(index + 2));
        row._index = index;
      }
      next.set(item.id, row);
    }
    for (const row of this.live.values()) {
      row.remove();
      row._index = -1;
      this.pool.push(row);
    }
    this.live = next;
    this.stale = false;
  }

  newRow() {
    const row = this.createRow(this.rowTestid);
    row.style.height = `${this.rowHeight}px`;
    row.tabIndex = -1;
    return row;
  }
}
