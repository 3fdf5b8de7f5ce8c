// The customer display's script: it keeps the page the kiosk rendered current from /events. Each event carries,
// under "display", the texts the kiosk computed for the page (the same as it renders into the page itself), so this
// script formats nothing and decides nothing: it sets the texts, shows or hides the QR code, and counts the time
// left down between events from the seconds the kiosk said were left.
"use strict";
(function () {
  var lines = ["payee", "amount", "share", "headline", "progress", "detail", "countdown", "reference", "fallback"];
  var secondsLeft = parseFloat(document.querySelector("main").getAttribute("data-seconds-left"));
  var receivedAt = performance.now();
  var qrCodeText = null;
  function setText(id, text) {
    var node = document.getElementById(id);
    node.textContent = text || "";
    node.hidden = !text;
  }
  function formatCountdown(seconds) {
    var remainder = seconds % 60;
    return (seconds - remainder) / 60 + ":" + (remainder < 10 ? "0" : "") + remainder;
  }
  // As the kiosk rounds it: up, so a charge with 0.2 s left still shows 0:01.
  function countdown() {
    if (!isFinite(secondsLeft)) { return null; }
    var left = secondsLeft - (performance.now() - receivedAt) / 1000;
    return formatCountdown(Math.max(0, Math.ceil(left)));
  }
  function render(view) {
    document.body.setAttribute("data-state", view.state);
    document.body.toggleAttribute("data-off-air", view.off_air === true);
    for (var index = 0; index < lines.length; index++) { setText(lines[index], view[lines[index]]); }
    secondsLeft = typeof view.seconds_left === "number" ? view.seconds_left : NaN;
    receivedAt = performance.now();
    if (view.qr_code_text) { qrCodeText = view.qr_code_text; }
    showCheckout(view.qr_code || null);
  }
  // The QR code of the EID on the air, from this server; a new EID gets a new image.
  var checkoutShown = document.getElementById("qr") ? document.getElementById("qr").getAttribute("src") : null;
  function watchImage(image) {
    // An EID replaced before its image came has none: the next status names the new one.
    image.addEventListener("error", function () {
      if (image.getAttribute("src") === checkoutShown) { document.getElementById("checkout").hidden = true; }
    });
    image.addEventListener("load", function () {
      document.getElementById("checkout").hidden = !checkoutShown;
    });
  }
  if (document.getElementById("qr")) { watchImage(document.getElementById("qr")); }
  function showCheckout(source) {
    checkoutShown = source;
    var aside = document.getElementById("checkout");
    var image = document.getElementById("qr");
    if (source) {
      if (!image) {
        image = document.createElement("img");
        image.id = "qr";
        image.alt = qrCodeText || "";
        watchImage(image);
        aside.insertBefore(image, aside.firstChild);
      }
      if (image.getAttribute("src") !== source) { image.setAttribute("src", source); }
      document.body.setAttribute("data-checkout", "");
    } else {
      if (image) { image.removeAttribute("src"); }
      document.body.removeAttribute("data-checkout");
    }
    aside.hidden = !source;
  }
  var lost = null;
  function connected() {
    clearTimeout(lost);
    lost = null;
    document.getElementById("connection").hidden = true;
  }
  function connect() {
    var events = new EventSource("events");
    events.onopen = connected;
    events.onmessage = function (event) {
      var status;
      try { status = JSON.parse(event.data); } catch (error) { return; }
      if (!status || !status.display) { return; }
      connected();
      render(status.display);
    };
    events.onerror = function () {
      // A dropped stream reconnects within a second or so; say so only if that does not happen.
      if (lost === null) {
        lost = setTimeout(function () { document.getElementById("connection").hidden = false; }, 2500);
      }
      // EventSource gives up for good after an HTTP error (a proxy's 502, say); start over then.
      if (events.readyState === EventSource.CLOSED) {
        events.close();
        setTimeout(connect, 3000);
      }
    };
  }
  setInterval(function () { setText("countdown", countdown()); }, 250);
  connect();
})();
