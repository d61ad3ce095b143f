// The web console's one script: a session's recording in the asciinema
// player, and the timeline's rows seeking it. Everything else works
// without script.
(function () {
  'use strict';
  var el = document.getElementById('player');
  if (!el || !window.AsciinemaPlayer) {
    return;
  }
  var player = window.AsciinemaPlayer.create(el.dataset.cast, el, { fit: 'width', preload: true });
  window.walisshPlayer = player;
  document.querySelectorAll('.timeline [data-t]').forEach(function (row) {
    row.addEventListener('click', function () {
      player.seek(parseFloat(row.dataset.t)).then(function () { player.play(); });
    });
  });
})();
