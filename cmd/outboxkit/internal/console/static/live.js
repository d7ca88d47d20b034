"use strict";
// Progressive enhancement: refresh the live part every 5 s without reloading the page.
setInterval(function () {
  fetch(location.href, {credentials: "same-origin"}).then(function (r) { return r.ok ? r.text() : null; }).then(function (html) {
    if (!html) return;
    var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("live");
    var live = document.getElementById("live");
    if (fresh && live) live.replaceWith(fresh);
  }).catch(function () {});
}, 5000);
