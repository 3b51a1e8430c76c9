// The web chat page's unsent messages (loaded before page.js). Every message is queued here
// in the order it was typed and leaves only when everything before it did: a message whose
// files are still uploading holds back the ones typed after it, so the daemon gets (and
// answers) them in order. Frames stay until the daemon acknowledges them, and are kept in
// sessionStorage, so a reload (or a daemon restart) sends them again; the daemon drops a
// frame whose id it already took. Bounded: a tab cannot pile up messages while offline.
(() => {
  const MAX_FRAMES = 20;
  /** sessionStorage holds UTF-16: two bytes a character. */
  const MAX_BYTES = 256 * 1024;
  const bytesOf = (text) => 2 * text.length;

  window.channeldOutbox = (storageKey) => {
    /** In typed order: `{ id, frame, sentOn, bytes }`; `frame` is null while its files upload. */
    const entries = [];

    function save() {
      const frames = entries.filter((e) => e.frame).map((e) => e.frame);
      try {
        if (frames.length) sessionStorage.setItem(storageKey, JSON.stringify(frames));
        else sessionStorage.removeItem(storageKey);
      } catch {
        /* storage full or off: the frames stay in memory, and a reload loses them */
      }
    }

    /** The frames a previous load of this tab left unacknowledged, queued again. */
    function restore() {
      let frames = [];
      try {
        frames = JSON.parse(sessionStorage.getItem(storageKey) || '[]');
      } catch {
        frames = [];
      }
      for (const f of Array.isArray(frames) ? frames.slice(0, MAX_FRAMES) : []) {
        if (f && f.type === 'message' && typeof f.id === 'string' && typeof f.text === 'string')
          entries.push({ id: f.id, frame: f, sentOn: null, bytes: bytesOf(JSON.stringify(f)) });
      }
      return entries.map((e) => e.frame);
    }

    /** Whether one more message of `text` fits the bounds. */
    function room(text) {
      const used = entries.reduce((n, e) => n + e.bytes, 0);
      return entries.length < MAX_FRAMES && used + bytesOf(text) + 2048 <= MAX_BYTES;
    }

    /** Queues a message last; `frame` null while its files upload (see ready). */
    function push(id, frame, text) {
      entries.push({ id, frame, sentOn: null, bytes: bytesOf(frame ? JSON.stringify(frame) : text) + 2048 });
      save();
    }

    /** The frame of a queued message, once its files are uploaded. */
    function ready(id, frame) {
      const e = entries.find((x) => x.id === id);
      if (!e) return;
      e.frame = frame;
      e.bytes = bytesOf(JSON.stringify(frame));
      save();
    }

    /** Takes a message out (acknowledged, refused or given up); its entry, if it was queued. */
    function remove(id) {
      const i = entries.findIndex((x) => x.id === id);
      if (i < 0) return undefined;
      const [e] = entries.splice(i, 1);
      save();
      return e;
    }

    /** Sends on `ws`, in order, what it has not carried yet, up to the first message still uploading. */
    function flush(ws, onSent) {
      for (const e of entries) {
        if (!e.frame) break;
        if (e.sentOn === ws) continue;
        e.sentOn = ws;
        ws.send(JSON.stringify(e.frame));
        onSent(e.id);
      }
    }

    const ids = () => entries.map((e) => e.id);
    return { restore, room, push, ready, remove, flush, ids };
  };
})();
