// The web chat page's script: separate files (no inline script), so the page works under
// a Content-Security-Policy with script-src 'self'. Markdown is render.js, the queue of
// unsent messages outbox.js; both load before this one.
(() => {
  const meta = (name) => document.querySelector(`meta[name="${name}"]`).content;
  const channel = meta('channeld-channel');
  // 'token', 'none', or 'refused': the daemon takes no socket from this client without a token.
  const auth = meta('channeld-auth');
  const needsToken = auth === 'token';
  const $ = (id) => document.getElementById(id);
  const log = $('log'),
    input = $('input'),
    send = $('send'),
    status = $('status');
  const authForm = $('auth'),
    authMsg = $('auth-msg'),
    tokenInput = $('token'),
    notice = $('notice');

  // One conversation per tab: sessionStorage survives a reload of this tab, not other tabs.
  const tab = sessionStorage.getItem('channeld.tab') || (crypto.randomUUID ? crypto.randomUUID() : String(Math.random()).slice(2));
  sessionStorage.setItem('channeld.tab', tab);
  const tokenKey = `channeld.token.${channel}`;
  let token = sessionStorage.getItem(tokenKey) || '';
  let ws,
    seq = 0,
    retryMs = 500,
    typingEl = null,
    typingTimer = null,
    failedHandshakes = 0,
    retryTimer = null;
  const outbox = window.channeldOutbox(`channeld.outbox.${channel}`);
  const bubbles = new Map();
  const mine = new Map();

  const render = window.channeldRender;

  function scroll() {
    log.scrollTop = log.scrollHeight;
  }
  /** Server-drawn entries go above the bubbles restored unsent after a reload, which stay last until acknowledged. */
  function place(el) {
    const pin = log.querySelector('.msg.restored');
    if (pin) log.insertBefore(el, pin);
    else log.appendChild(el);
    scroll();
    return el;
  }
  function add(cls, text) {
    const el = document.createElement('div');
    el.className = `msg ${cls}`;
    el.textContent = text;
    return place(el);
  }
  function addMine(id, text, local) {
    if (mine.has(id)) return mine.get(id);
    const el = document.createElement('div');
    el.className = 'msg me';
    el.textContent = text;
    el.dataset.id = id;
    mine.set(id, el);
    // What this tab typed goes last; what the server replays goes above restored bubbles.
    if (local) {
      log.appendChild(el);
      scroll();
    } else place(el);
    return el;
  }
  function clearTyping() {
    clearTimeout(typingTimer);
    if (typingEl) {
      typingEl.remove();
      typingEl = null;
    }
  }

  /** An unacknowledged bubble says so: `pending` (sending, or not sent while offline), `failed` (refused, with Retry), null (acknowledged). */
  function mark(id, state, reason, frame) {
    const el = mine.get(id);
    if (!el) return;
    el.querySelector('.note')?.remove();
    el.classList.toggle('unsent', state === 'pending');
    el.classList.toggle('failed', state === 'failed');
    if (!state) return el.classList.remove('restored');
    const note = document.createElement('small');
    note.className = 'note';
    const online = ws && ws.readyState === WebSocket.OPEN;
    note.textContent = state === 'pending' ? (online ? 'sending…' : 'not sent yet') : `not sent: ${reason}`;
    if (state === 'failed' && frame) {
      // A refused message is never resent on its own: the user decides, and Retry keeps its id.
      const retry = document.createElement('button');
      retry.type = 'button';
      retry.className = 'retry';
      retry.textContent = 'Retry';
      retry.onclick = () => {
        outbox.push(frame.id, frame, frame.text);
        mark(frame.id, 'pending');
        flush();
      };
      note.append(' ', retry);
    }
    el.append(note);
  }
  function flush() {
    if (ws && ws.readyState === WebSocket.OPEN) outbox.flush(ws, (id) => mark(id, 'pending'));
  }
  /** Shown above the log: why this page cannot chat, and what the operator must set. */
  function showNotice(text) {
    notice.textContent = text;
    notice.hidden = !text;
  }

  function askToken(message) {
    authMsg.textContent = message;
    authForm.classList.add('shown');
    tokenInput.focus();
  }

  authForm.addEventListener('submit', (e) => {
    e.preventDefault();
    const t = tokenInput.value.trim();
    if (!t) return;
    token = t;
    sessionStorage.setItem(tokenKey, t);
    tokenInput.value = '';
    authForm.classList.remove('shown');
    clearTimeout(retryTimer);
    retryMs = 500;
    if (ws) {
      ws.onclose = null;
      ws.close();
    }
    connect();
  });

  /**
   * A browser never sees why a handshake failed (a 401, a 429 or a daemon that is down all look
   * alike), so the page asks the daemon's connect check and says which it is. An answer that
   * comes after the next try opened (or began) is about an old attempt and is dropped.
   */
  function explainRefusal(failed) {
    const q = new URLSearchParams({ tab });
    if (token) q.set('token', token);
    const current = () => ws === failed;
    const notReached = (text) => {
      if (current() && ++failedHandshakes >= 3) showNotice(text);
    };
    fetch(`/webchat/${encodeURIComponent(channel)}/connect-check?${q}`, { method: 'POST', cache: 'no-store' })
      .then(async (r) => {
        const why = r.status === 204 ? '' : ((await r.json().catch(() => ({}))).error ?? `HTTP ${r.status}`);
        if (!current()) return;
        if (r.status === 401 && needsToken) return askToken('The access token was refused; enter it again.');
        if (r.status === 429)
          return showNotice(`The daemon refuses more connections (${why}): close this tab's duplicates or other tabs of this chat. Retrying…`);
        if (r.status === 401)
          return showNotice('The daemon refuses this client: without access_token_env a web chat takes only loopback clients, not through a proxy. Retrying…');
        if (r.status === 403) return showNotice(`The daemon refuses this page (${why}). Retrying…`);
        notReached('The daemon did not accept the connection (it may be restarting). Retrying…');
      })
      .catch(() => notReached('The daemon is not reachable: it is not running, or the network is down. Retrying…'));
  }

  function connect() {
    if (auth === 'refused') {
      status.textContent = 'refused';
      showNotice(
        'The daemon refuses this page a connection: without an access token it takes web chat connections only from its own machine (loopback, not through a proxy that adds X-Forwarded-For). The operator must set access_token_env on this web chat channel; then open the page with that token.',
      );
      return;
    }
    if (needsToken && !token) {
      status.textContent = 'needs a token';
      askToken('This web chat needs its access token.');
      return;
    }
    const q = new URLSearchParams({ tab });
    if (token) q.set('token', token);
    const path = location.pathname.startsWith('/webchat/') ? `/chat/${encodeURIComponent(channel)}` : '/chat';
    ws = new WebSocket(`${(location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + path}?${q}`);
    let opened = false;
    ws.onopen = () => {
      opened = true;
      retryMs = 500;
      failedHandshakes = 0;
      showNotice('');
      clearTyping();
      status.textContent = 'connected';
      send.disabled = false;
      authForm.classList.remove('shown');
      flush();
    };
    ws.onmessage = (e) => {
      const f = JSON.parse(e.data);
      if (f.type === 'ack') {
        outbox.remove(f.id);
        mark(f.id, null);
      } else if (f.type === 'message') addMine(f.id, f.text);
      else if (f.type === 'typing') {
        if (!typingEl) {
          typingEl = document.createElement('div');
          typingEl.className = 'typing';
          typingEl.textContent = 'typing…';
          place(typingEl);
        }
        // The daemon repeats it every few seconds while a turn runs: one not repeated is over.
        clearTimeout(typingTimer);
        typingTimer = setTimeout(clearTyping, 10_000);
      } else if (f.type === 'reply') {
        clearTyping();
        let el = bubbles.get(f.ref);
        if (!el) {
          el = add('bot', '');
          el.dataset.ref = f.ref;
          bubbles.set(f.ref, el);
        }
        render(el, f.text);
        // Approval questions carry buttons; a click sends the button's command as a message.
        for (const b of f.buttons || []) {
          const btn = document.createElement('button');
          btn.type = 'button';
          btn.className = 'choice';
          btn.textContent = b.label;
          btn.onclick = () => {
            const id = `${Date.now().toString(36)}-${seq++}`;
            outbox.push(id, { type: 'message', id, text: b.data }, b.data);
            for (const other of el.querySelectorAll('button.choice')) other.disabled = true;
            flush();
          };
          el.append(document.createElement('br'), btn);
        }
        // A growing draft is not read out again on every edit; the final answer is.
        el.setAttribute('aria-busy', String(!f.final));
        el.classList.toggle('draft', !f.final);
        el.classList.toggle('final', !!f.final);
        scroll();
      } else if (f.type === 'delete') {
        const el = bubbles.get(f.ref);
        if (el) {
          el.remove();
          bubbles.delete(f.ref);
        }
      } else if (f.type === 'error') {
        // An error naming a frame refuses that message: it leaves the queue and its bubble offers Retry.
        const refused = f.id !== undefined && mine.has(f.id) ? outbox.remove(f.id) : undefined;
        if (refused) mark(f.id, 'failed', f.message, refused.frame);
        else {
          if (f.id !== undefined) outbox.remove(f.id);
          add('error', f.message);
        }
      }
    };
    ws.onclose = () => {
      send.disabled = true;
      clearTyping();
      for (const id of outbox.ids()) mark(id, 'pending');
      if (!opened) explainRefusal(ws);
      status.textContent = 'reconnecting…';
      retryTimer = setTimeout(connect, retryMs);
      retryMs = Math.min(retryMs * 2, 10000);
    };
  }

  // Files go up first (POST /webchat/<id>/upload); the message then names them.
  const filesEl = $('files');
  const fileInput = $('file');
  let files = [];
  function showFiles() {
    filesEl.textContent = files.length ? `Attached: ${files.map((f) => f.name).join(', ')}` : '';
  }
  function attach(list) {
    files = files.concat([...list]).slice(0, 10);
    showFiles();
  }
  $('attach').addEventListener('click', () => fileInput.click());
  fileInput.addEventListener('change', () => {
    attach(fileInput.files);
    fileInput.value = '';
  });
  document.addEventListener('dragover', (e) => {
    e.preventDefault();
    document.body.classList.add('dragging');
  });
  document.addEventListener('dragleave', (e) => {
    if (!e.relatedTarget) document.body.classList.remove('dragging');
  });
  document.addEventListener('drop', (e) => {
    e.preventDefault();
    document.body.classList.remove('dragging');
    if (e.dataTransfer?.files.length) attach(e.dataTransfer.files);
  });
  async function upload(f) {
    const q = new URLSearchParams({ tab });
    if (token) q.set('token', token);
    const r = await fetch(`/webchat/${encodeURIComponent(channel)}/upload?${q}`, {
      method: 'POST',
      headers: { 'content-type': f.type || 'application/octet-stream', 'x-file-name': encodeURIComponent(f.name) },
      body: f,
    });
    const body = await r.json().catch(() => ({}));
    if (!r.ok) throw new Error(`${f.name}: ${body.error || `HTTP ${r.status}`}`);
    return { id: body.id, name: body.name, mime: body.mime };
  }

  const shown = (text, names) => [text, ...names.map((n) => `📎 ${n}`)].filter(Boolean).join('\n');
  const frameOf = (id, text, attachments) => ({ type: 'message', id, text, ...(attachments.length ? { attachments } : {}) });

  $('form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const text = input.value.trim();
    if (!text && !files.length) return;
    if (!outbox.room(text)) {
      add('error', 'Too many messages are waiting to be sent: wait until the connection is back, then send this one.');
      return;
    }
    const id = `${Date.now().toString(36)}-${seq++}`;
    const chosen = files;
    files = [];
    showFiles();
    input.value = '';
    addMine(
      id,
      shown(
        text,
        chosen.map((f) => f.name),
      ),
      true,
    );
    // Queued now, in typed order: what is typed while these files upload waits behind them.
    outbox.push(id, chosen.length ? null : frameOf(id, text, []), text);
    mark(id, 'pending');
    flush();
    if (!chosen.length) return;
    let attachments = [];
    try {
      attachments = await Promise.all(chosen.map(upload));
    } catch (err) {
      add('error', String(err.message || err));
      if (!text) {
        outbox.remove(id);
        mark(id, 'failed', 'its files could not be uploaded');
        flush();
        return;
      }
      attachments = [];
    }
    outbox.ready(id, frameOf(id, text, attachments));
    flush();
  });
  input.addEventListener('keydown', (e) => {
    // Enter that ends an IME composition (keyCode 229 in older engines) picks the text, it does not send.
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing && e.keyCode !== 229) {
      e.preventDefault();
      $('form').requestSubmit();
    }
  });
  // What an earlier load of this tab typed and the daemon never acknowledged: shown last, sent again.
  for (const f of outbox.restore()) {
    addMine(
      f.id,
      shown(
        f.text,
        (f.attachments || []).map((a) => a.name || 'file'),
      ),
      true,
    ).classList.add('restored');
    mark(f.id, 'pending');
  }
  connect();
})();
