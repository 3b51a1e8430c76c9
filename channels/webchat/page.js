// The web chat page's script: a separate file (no inline script), so the page works under
// a Content-Security-Policy with script-src 'self'. Markdown comes from markdown-it (served
// by the daemon from node_modules) with raw HTML off; its output is parsed in an inert
// document and only allowed elements and attributes are rebuilt in the page, so no
// unsanitized text ever reaches innerHTML.
(() => {
  const meta = (name) => document.querySelector(`meta[name="${name}"]`).content;
  const channel = meta('channeld-channel');
  const needsToken = meta('channeld-auth') === 'token';
  const $ = (id) => document.getElementById(id);
  const log = $('log'),
    input = $('input'),
    send = $('send'),
    status = $('status');
  const authForm = $('auth'),
    authMsg = $('auth-msg'),
    tokenInput = $('token');

  // One conversation per tab: sessionStorage survives a reload of this tab, not other tabs.
  const tab = sessionStorage.getItem('channeld.tab') || (crypto.randomUUID ? crypto.randomUUID() : String(Math.random()).slice(2));
  sessionStorage.setItem('channeld.tab', tab);
  const tokenKey = `channeld.token.${channel}`;
  let token = sessionStorage.getItem(tokenKey) || '';
  let ws,
    seq = 0,
    retryMs = 500,
    typingEl = null,
    retryTimer = null;
  const pending = new Map();
  const bubbles = new Map();
  const mine = new Map();

  const md = window.markdownit ? window.markdownit({ html: false, linkify: true, breaks: true }) : null;
  const TAGS = new Set([
    'P',
    'BR',
    'HR',
    'STRONG',
    'EM',
    'S',
    'DEL',
    'CODE',
    'PRE',
    'UL',
    'OL',
    'LI',
    'BLOCKQUOTE',
    'H1',
    'H2',
    'H3',
    'H4',
    'H5',
    'H6',
    'A',
    'TABLE',
    'THEAD',
    'TBODY',
    'TR',
    'TH',
    'TD',
  ]);

  /** Rebuilds allowed nodes from the inert parse; anything else becomes its text. */
  function rebuild(node) {
    if (node.nodeType === Node.TEXT_NODE) return document.createTextNode(node.nodeValue);
    if (node.nodeType !== Node.ELEMENT_NODE) return null;
    if (!TAGS.has(node.tagName)) return document.createTextNode(node.textContent || node.getAttribute('alt') || '');
    const el = document.createElement(node.tagName);
    if (node.tagName === 'A') {
      const href = node.getAttribute('href') || '';
      if (/^(https?:|mailto:)/i.test(href)) {
        el.setAttribute('href', href);
        el.setAttribute('rel', 'noopener noreferrer nofollow');
        el.setAttribute('target', '_blank');
      }
    }
    if (node.tagName === 'CODE' && /^language-[\w+-]+$/.test(node.getAttribute('class') || '')) el.className = node.getAttribute('class');
    if (node.tagName === 'OL' && /^\d+$/.test(node.getAttribute('start') || '')) el.setAttribute('start', node.getAttribute('start'));
    for (const child of node.childNodes) {
      const c = rebuild(child);
      if (c) el.appendChild(c);
    }
    if (node.tagName === 'PRE') return codeBlock(el);
    return el;
  }

  function copyText(text, button) {
    const done = () => {
      button.textContent = 'Copied';
      setTimeout(() => (button.textContent = 'Copy'), 1500);
    };
    const fallback = () => {
      const area = document.createElement('textarea');
      area.value = text;
      area.setAttribute('readonly', '');
      area.style.position = 'fixed';
      area.style.opacity = '0';
      document.body.appendChild(area);
      area.select();
      try {
        document.execCommand('copy');
        done();
      } finally {
        area.remove();
      }
    };
    if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(text).then(done, fallback);
    else fallback();
  }

  /** A fenced code block: monospace box with a copy button. */
  function codeBlock(pre) {
    const box = document.createElement('div');
    box.className = 'code';
    const button = document.createElement('button');
    button.type = 'button';
    button.className = 'copy';
    button.textContent = 'Copy';
    button.addEventListener('click', () => copyText(pre.textContent.replace(/\n$/, ''), button));
    box.append(pre, button);
    return box;
  }

  /** Renders model Markdown into a bubble (drafts too); plain text when markdown-it did not load. */
  function render(el, text) {
    if (!md) {
      el.textContent = text;
      return;
    }
    const doc = new DOMParser().parseFromString(md.render(text), 'text/html');
    const nodes = [];
    // markdown-it puts a newline between blocks; at the top level it is not content.
    for (const child of doc.body.childNodes) {
      if (child.nodeType === Node.TEXT_NODE && !child.nodeValue.trim()) continue;
      const c = rebuild(child);
      if (c) nodes.push(c);
    }
    el.replaceChildren(...nodes);
  }

  function scroll() {
    log.scrollTop = log.scrollHeight;
  }
  function add(cls, text) {
    const el = document.createElement('div');
    el.className = `msg ${cls}`;
    el.textContent = text;
    log.appendChild(el);
    scroll();
    return el;
  }
  function addMine(id, text) {
    if (mine.has(id)) return;
    const el = add('me', text);
    el.dataset.id = id;
    mine.set(id, el);
  }
  function clearTyping() {
    if (typingEl) {
      typingEl.remove();
      typingEl = null;
    }
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

  function connect() {
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
      status.textContent = 'connected';
      send.disabled = false;
      authForm.classList.remove('shown');
      for (const frame of pending.values()) ws.send(JSON.stringify(frame));
    };
    ws.onmessage = (e) => {
      const f = JSON.parse(e.data);
      if (f.type === 'ack') pending.delete(f.id);
      else if (f.type === 'message') addMine(f.id, f.text);
      else if (f.type === 'typing') {
        if (!typingEl) {
          typingEl = document.createElement('div');
          typingEl.className = 'typing';
          typingEl.textContent = 'typing…';
          log.appendChild(typingEl);
          scroll();
        }
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
            const frame = { type: 'message', id, text: b.data };
            pending.set(id, frame);
            for (const other of el.querySelectorAll('button.choice')) other.disabled = true;
            if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(frame));
          };
          el.append(document.createElement('br'), btn);
        }
        el.classList.toggle('draft', !f.final);
        el.classList.toggle('final', !!f.final);
        scroll();
      } else if (f.type === 'delete') {
        const el = bubbles.get(f.ref);
        if (el) {
          el.remove();
          bubbles.delete(f.ref);
        }
      } else if (f.type === 'error') add('error', f.message);
    };
    ws.onclose = () => {
      send.disabled = true;
      // A handshake refused by a server that wants a token: the token is missing or wrong.
      if (!opened && needsToken)
        askToken(token ? 'The access token was refused (or the daemon is not reachable); enter it again.' : 'This web chat needs its access token.');
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

  $('form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const text = input.value.trim();
    if (!text && !files.length) return;
    const id = `${Date.now().toString(36)}-${seq++}`;
    const chosen = files;
    files = [];
    showFiles();
    input.value = '';
    addMine(id, [text, ...chosen.map((f) => `📎 ${f.name}`)].filter(Boolean).join('\n'));
    let attachments = [];
    try {
      attachments = await Promise.all(chosen.map(upload));
    } catch (err) {
      add('error', String(err.message || err));
      if (!text) return;
      attachments = [];
    }
    const frame = { type: 'message', id, text, ...(attachments.length ? { attachments } : {}) };
    pending.set(id, frame);
    if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(frame));
  });
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey) {
      e.preventDefault();
      $('form').requestSubmit();
    }
  });
  connect();
})();
