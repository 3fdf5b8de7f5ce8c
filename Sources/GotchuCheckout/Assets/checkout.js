// The web checkout's script. The pages work without it: it only counts the time left down, keeps a second tap
// from sending the form again, reports what the session's event stream says happened elsewhere, and writes times
// in the phone's own zone.
"use strict";
(function () {
  var status = document.getElementById("status");
  var left = document.getElementById("time-left");
  var form = document.getElementById("pay");
  var progress = document.getElementById("progress");
  var sent = false;
  var ended = false;
  var timer = null;
  function say(text) {
    if (status) { status.textContent = text; }
  }
  function end(text) {
    if (ended) { return; }
    ended = true;
    say(text);
    if (form && !sent) { form.hidden = true; }
    if (timer !== null) { clearInterval(timer); }
  }
  var times = document.querySelectorAll("time[datetime]");
  for (var index = 0; index < times.length; index++) {
    var when = new Date(times[index].getAttribute("datetime"));
    if (!isNaN(when.getTime())) { times[index].textContent = when.toLocaleString(); }
  }
  if (left) {
    var seconds = parseInt(left.getAttribute("data-seconds"), 10) || 0;
    var start = Date.now();
    timer = setInterval(function () {
      var remaining = Math.max(0, seconds - Math.floor((Date.now() - start) / 1000));
      var rest = remaining % 60;
      left.textContent = Math.floor(remaining / 60) + ":" + (rest < 10 ? "0" : "") + rest;
      if (remaining === 0) { end("This charge has expired. Ask for a new one."); }
    }, 1000);
  }
  if (form) {
    form.addEventListener("submit", function (event) {
      if (sent) { event.preventDefault(); return; }
      sent = true;
      form.setAttribute("aria-busy", "true");
      say("Paying…");
    });
  }
  var url = status && status.getAttribute("data-events");
  if (!url || !window.EventSource) { return; }
  var events = new EventSource(url);
  function read(event) {
    try { return JSON.parse(event.data); } catch (error) { return {}; }
  }
  function shares(data) {
    if (progress && data.shares > 1) {
      progress.textContent = data.shares_paid + " of " + data.shares + " paid";
    }
  }
  events.addEventListener("share-paid", function (event) { shares(read(event)); });
  events.addEventListener("paid", function (event) {
    events.close();
    shares(read(event));
    end("This charge has been paid.");
  });
  events.addEventListener("cancelled", function () {
    events.close();
    end("The merchant cancelled this charge.");
  });
  events.addEventListener("expired", function () {
    events.close();
    end("This charge has expired. Ask for a new one.");
  });
  events.addEventListener("eid-rotated", function () {
    if (!ended) { say("The terminal now shows a new QR code for this charge; this page still pays it."); }
  });
})();
