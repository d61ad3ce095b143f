// The web console's one script: a session's recording, or its live view,
// in the asciinema player, with the timeline's rows seeking a recording;
// and the approvals page kept current. Everything else works without
// script.
(function () {
  'use strict';

  function player(el) {
    if (el.dataset.live) {
      // The live view: the session's recording so far, then each event
      // as it comes, shown at once (no buffer: it is read-only).
      var scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
      var source = { driver: 'websocket', url: scheme + '//' + location.host + el.dataset.live, bufferTime: 0 };
      window.walisshPlayer = window.AsciinemaPlayer.create(source, el, { fit: 'width', autoPlay: true });
      return;
    }
    var p = window.AsciinemaPlayer.create(el.dataset.cast, el, { fit: 'width', preload: true });
    window.walisshPlayer = p;
    document.querySelectorAll('.timeline [data-t]').forEach(function (row) {
      row.addEventListener('click', function () {
        p.seek(parseFloat(row.dataset.t)).then(function () { p.play(); });
      });
    });
  }

  // Waits for the list to change, then shows the new one.
  function approvals(el) {
    var seen = el.dataset.version;
    function wait() {
      fetch('/approvals/changes?seen=' + encodeURIComponent(seen), { credentials: 'same-origin' })
        .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
        .then(function (v) {
          if (v.trim() !== seen) { location.reload(); } else { wait(); }
        })
        .catch(function () { setTimeout(wait, 2000); });
    }
    wait();
  }

  var el = document.getElementById('player');
  if (el && window.AsciinemaPlayer) {
    player(el);
  }
  var list = document.getElementById('approvals');
  if (list) {
    approvals(list);
  }
})();
