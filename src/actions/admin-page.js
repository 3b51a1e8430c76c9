// The operator page's script, served as a file (no inline script) so /admin works under a
// Content-Security-Policy with script-src 'self'.
(() => {
  let token = sessionStorage.getItem('channeld.admin') || '';
  let asking = null;
  const $ = (id) => document.getElementById(id);
  const HEAD = {
    channels: ['Channel', 'Kind', 'State', 'Since', 'Attempts', 'Last error'],
    turns: ['Id', 'State', 'Agent', 'Conversation', 'Model', 'Started', ''],
    mcp: ['Agent', 'Server', 'Transport', 'State', 'Tools', 'Since', 'Last error'],
  };
  const cell = (text, cls, label) => {
    const td = document.createElement('td');
    td.textContent = text;
    if (cls) td.className = cls;
    if (label) td.dataset.label = label;
    return td;
  };
  const row = (kind, values, classes = []) => values.map((v, i) => cell(v, classes[i], HEAD[kind][i]));
  const notice = (text, isError) => {
    $('notice').textContent = text;
    $('notice').className = isError ? 'error' : '';
  };

  /**
   * The sign-in form (a password field, not prompt(): the token is not shown, a wrong one says
   * so and asks again, and nothing can leave the page stuck). One form for every request
   * refused at once: parallel 401s share the answer. `refused` says the last token was wrong.
   */
  function askToken(refused) {
    asking ??= new Promise((resolve) => {
      const form = $('login');
      $('login-error').textContent = refused ? 'That token was refused; check it and try again.' : '';
      form.hidden = false;
      $('login-token').value = '';
      $('login-token').focus();
      form.onsubmit = (e) => {
        e.preventDefault();
        const t = $('login-token').value.trim();
        if (!t) {
          $('login-error').textContent = 'Enter the admin token.';
          return;
        }
        form.hidden = true;
        token = t;
        sessionStorage.setItem('channeld.admin', t);
        resolve(true);
      };
    }).finally(() => setTimeout(() => (asking = null), 0));
    return asking;
  }

  async function call(path, method = 'GET', body) {
    const used = token;
    const res = await fetch(path, {
      method,
      headers: { ...(used ? { authorization: `Bearer ${used}` } : {}), ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    if (res.status === 401) {
      // Another request may already have asked while this one was in flight.
      if (token !== used || (await askToken(Boolean(used)))) return call(path, method, body);
    }
    if (!res.ok) throw new Error((await res.json().catch(() => ({}))).error || res.statusText);
    return res.json();
  }

  // The charts' script (admin-charts-page.js) asks through the same sign-in.
  window.channeldAdmin = { call };

  function showReload(r) {
    const el = $('last-reload');
    if (!r) {
      el.textContent = '';
      el.className = '';
      return;
    }
    el.textContent = `last reload ${new Date(r.at).toLocaleTimeString()}: ${r.ok ? 'applied' : `refused — ${r.errors.join('; ')}`}`;
    el.className = r.ok ? '' : 'refused';
  }

  async function load() {
    const [status, channels, turns] = await Promise.all([call('/actions/status'), call('/actions/channels'), call('/actions/turns')]);
    const needs = { any_channel: ' (a channel)', all_channels: ' (every channel)' }[status.ready_requires] || '';
    $('meta').textContent = `v${status.version} · pid ${status.pid} · generation ${status.generation}${status.ready ? ' · ready' : ' · not ready'}${needs}`;
    // Coloured by [http] ready_requires: what /readyz says, not whether the process answers.
    $('meta').className = status.ready ? 'ready' : 'not-ready';
    showReload(status.last_reload);
    // Sections kept in files of their own (admin-firings.js) draw from the same payload.
    document.dispatchEvent(new CustomEvent('channeld:status', { detail: status }));
    const cb = $('channels');
    cb.replaceChildren();
    for (const c of channels) {
      const tr = document.createElement('tr');
      tr.dataset.channel = c.id;
      tr.append(
        ...row(
          'channels',
          [
            c.id,
            c.kind,
            c.state,
            new Date(c.since).toLocaleTimeString(),
            String(c.attempts),
            c.last_error ? `${c.last_error.code}: ${c.last_error.message}` : '—',
          ],
          [undefined, undefined, `state ${c.state}`],
        ),
      );
      cb.append(tr);
    }
    if (!channels.length) {
      const tr = document.createElement('tr');
      tr.append(cell('no channels', 'empty'));
      cb.append(tr);
    }
    $('cluster').hidden = !status.cluster;
    if (status.cluster) {
      const ib = $('instances');
      ib.replaceChildren();
      for (const i of status.cluster.instances) {
        const leases = status.cluster.leases
          .filter((l) => l.owner === i.id)
          .map((l) => l.key)
          .join(', ');
        const tr = document.createElement('tr');
        tr.dataset.instance = i.id;
        tr.append(
          cell(i.id + (i.id === status.cluster.instance ? ' (this)' : '')),
          cell(i.alive ? 'yes' : 'no', `state ${i.alive ? 'connected' : 'failed'}`),
          cell(String(i.generation ?? '—')),
          cell(String(i.in_flight ?? 0)),
          cell(String(i.queued ?? 0)),
          cell(leases || '—'),
        );
        ib.append(tr);
      }
    }
    const mb = $('mcp');
    mb.replaceChildren();
    for (const m of status.mcp_servers || []) {
      const tr = document.createElement('tr');
      tr.dataset.mcp = `${m.agent}/${m.name}`;
      tr.append(
        ...row(
          'mcp',
          [
            m.agent,
            m.name,
            m.transport,
            m.state,
            String(m.tools),
            new Date(m.since).toLocaleTimeString(),
            m.last_error ? `${m.last_error.code}: ${m.last_error.message}` : '—',
          ],
          [undefined, undefined, undefined, `state ${m.state}`],
        ),
      );
      mb.append(tr);
    }
    if (!(status.mcp_servers || []).length) {
      const tr = document.createElement('tr');
      tr.append(cell('no MCP servers', 'empty'));
      mb.append(tr);
    }
    const tb = $('turns');
    tb.replaceChildren();
    for (const t of turns) {
      const tr = document.createElement('tr');
      tr.dataset.turn = t.id;
      const stop = document.createElement('button');
      stop.type = 'button';
      stop.textContent = 'Stop';
      stop.dataset.stop = t.id;
      stop.onclick = async () => {
        stop.disabled = true;
        try {
          const r = await call('/actions/stop-turn', 'POST', { id: t.id });
          notice(`turn ${r.id} ${r.result}`);
        } catch (e) {
          notice(e.message, true);
        }
        load();
      };
      const act = document.createElement('td');
      act.append(stop);
      tr.append(...row('turns', [t.id, t.state, t.agent, t.scope, t.model || '—', t.started_at ? new Date(t.started_at).toLocaleTimeString() : 'queued']), act);
      tb.append(tr);
    }
    if (!turns.length) {
      const tr = document.createElement('tr');
      tr.append(cell('no turns', 'empty'));
      tb.append(tr);
    }
    document.dispatchEvent(new Event('channeld:loaded'));
  }

  $('reload').onclick = async () => {
    try {
      const r = await call('/actions/reload', 'POST', {});
      // A refusal is shown once, by the last-reload line that load() fills in.
      notice(r.ok ? `reloaded: generation ${r.generation}` : '', false);
    } catch (e) {
      notice(e.message, true);
    }
    load();
  };

  function listen() {
    // Opened once the token is known (load() asked for it): the stream cannot ask itself.
    const es = new EventSource(`/admin/events${token ? `?token=${encodeURIComponent(token)}` : ''}`);
    // Channels, turns and reloads (also by SIGHUP or the CLI) all arrive as "changed".
    es.addEventListener('changed', () => load().catch((e) => notice(e.message, true)));
    es.onerror = () => notice('live updates interrupted; retrying…', true);
  }
  load().then(listen, (e) => {
    notice(e.message, true);
    listen();
  });
})();
