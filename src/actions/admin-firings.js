// The operator page's "Next firings" section: [[schedules]] and reminders, from the status
// payload the main script (admin-page.js) reads and announces as a "channeld:status" event.
// A file of its own so the rest of the page changes without touching it.
(() => {
  const $ = (id) => document.getElementById(id);
  const when = (iso) => (iso ? new Date(iso).toLocaleString() : 'never');
  const cell = (text, label) => {
    const td = document.createElement('td');
    td.textContent = text;
    td.dataset.label = label;
    return td;
  };
  document.addEventListener('channeld:status', (e) => {
    const status = e.detail;
    const body = $('firings');
    if (!body) return;
    const rows = [
      ...(status.schedules || []).map((s) => ({ key: `schedule:${s.id}`, what: `schedule ${s.id}`, where: s.channel, next: s.next_fire_at })),
      ...(status.reminders
        ? [{ key: 'reminders', what: `reminders (${status.reminders.pending} pending)`, where: 'all', next: status.reminders.next_fire_at }]
        : []),
    ];
    body.replaceChildren(
      ...rows.map((r) => {
        const tr = document.createElement('tr');
        tr.dataset.firing = r.key;
        tr.append(cell(r.what, 'What'), cell(r.where, 'Channel'), cell(when(r.next), 'Next firing'));
        return tr;
      }),
    );
    if (!rows.length) {
      const tr = document.createElement('tr');
      const td = cell('no schedules or reminders', 'What');
      td.className = 'empty';
      tr.append(td);
      body.append(tr);
    }
  });
})();
