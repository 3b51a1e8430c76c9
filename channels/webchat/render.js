// The web chat page's Markdown (loaded before page.js): markdown-it (served by the daemon
// from node_modules) with raw HTML off; its output is parsed in an inert document and only
// allowed elements and attributes are rebuilt in the page, so no unsanitized text ever
// reaches innerHTML.
(() => {
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

  window.channeldRender = render;
})();
