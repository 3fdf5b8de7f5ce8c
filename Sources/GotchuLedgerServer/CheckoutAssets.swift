/// The web checkout's style sheet, script and icon, served from this origin (`GET /p/assets/{name}`): the content
/// security policy allows no inline script or style and nothing from elsewhere.
enum CheckoutAssets {
    /// The `Cache-Control` of every asset: kept an hour, since an asset changes only with the server's version.
    static let cacheControl = "max-age=3600"

    /// An asset's media type and text.
    struct Asset: Sendable {
        var mediaType: String
        var text: String
    }

    /// Every asset by its name under `/p/assets/`.
    static let all: [String: Asset] = [
        "checkout.css": Asset(mediaType: "text/css; charset=utf-8", text: style),
        "checkout.js": Asset(mediaType: "text/javascript; charset=utf-8", text: script),
        "icon.svg": Asset(mediaType: "image/svg+xml", text: icon),
    ]

    // Mobile first: one column, a 360-pixel-wide screen in mind, tap targets at least 48 px high, text contrast above
    // 7:1 in both schemes, a visible focus ring.
    static let style = """
        :root{color-scheme:light dark;--fg:#111;--bg:#fff;--muted:#3d3d3d;--line:#b8b8b8;--accent:#0a4f96;\
        --on-accent:#fff;--ok:#04531b;--bad:#8a0000}
        @media (prefers-color-scheme:dark){:root{--fg:#f2f2f2;--bg:#111;--muted:#cfcfcf;--line:#5c5c5c;\
        --accent:#8cc2ff;--on-accent:#000;--ok:#8ee6a6;--bad:#ffabab}}
        *{box-sizing:border-box}
        body{margin:0;background:var(--bg);color:var(--fg);font:1.0625rem/1.5 system-ui,-apple-system,"Segoe UI",\
        Roboto,sans-serif}
        header,main,footer{max-width:32rem;margin:0 auto;padding:.75rem 1rem}
        header{display:flex;flex-wrap:wrap;justify-content:space-between;align-items:center;gap:.5rem;\
        border-bottom:1px solid var(--line)}
        .brand{font-weight:800;margin:0}
        #sign-out{display:flex;flex-wrap:wrap;align-items:center;gap:.25rem .5rem;margin:0;font-size:.9375rem}
        h1{font-size:1.5rem;line-height:1.25;margin:.5rem 0;overflow-wrap:anywhere}
        h2{font-size:1.25rem;margin:1.25rem 0 .5rem}
        p{overflow-wrap:anywhere}
        .amount{font-size:2.75rem;font-weight:800;line-height:1.1;margin:.25rem 0;font-variant-numeric:tabular-nums}
        .verified{color:var(--ok);font-weight:600}
        .unverified{color:var(--bad);font-weight:600}
        .mark{font-weight:800}
        .facts{display:grid;grid-template-columns:1fr 1fr;gap:.5rem;margin:1rem 0}
        .facts div{border:1px solid var(--line);border-radius:.5rem;padding:.5rem .75rem}
        dt{font-size:.875rem;color:var(--muted)}
        dd{margin:0;font-size:1.5rem;font-weight:700;font-variant-numeric:tabular-nums;overflow-wrap:anywhere}
        #receipt{grid-template-columns:1fr}
        #receipt dd{font-size:1rem;font-weight:400}
        .hint{color:var(--muted)}
        form{display:grid;gap:.75rem;margin:1rem 0}
        label{font-weight:600;margin-bottom:-.5rem}
        input{font:inherit;width:100%;min-height:3rem;padding:.625rem .75rem;border:2px solid var(--muted);\
        border-radius:.5rem;background:var(--bg);color:var(--fg)}
        button{font:inherit;font-weight:700;width:100%;min-height:3rem;padding:.625rem 1rem;border:2px solid \
        var(--accent);border-radius:.5rem;background:var(--accent);color:var(--on-accent);cursor:pointer}
        button.secondary{background:transparent;color:var(--accent)}
        button.link{width:auto;min-height:2.75rem;padding:.25rem .5rem;background:transparent;color:var(--accent);\
        font-weight:600;text-decoration:underline}
        .tips{display:grid;gap:.75rem}
        :focus-visible{outline:3px solid var(--fg);outline-offset:2px}
        a{color:var(--accent)}
        .problem{color:var(--bad);font-weight:600}
        #status{font-weight:700;padding:.75rem;border:2px solid var(--accent);border-radius:.5rem}
        #status:empty{padding:0;border:0}
        details{margin:.75rem 0}
        pre{white-space:pre-wrap;overflow-wrap:anywhere;font-size:.8125rem}
        code{overflow-wrap:anywhere}
        footer{margin-top:1.5rem;border-top:1px solid var(--line);color:var(--muted);font-size:.875rem}
        [hidden]{display:none!important}

        """

    // The page works without it: it only counts the time left down, keeps a second tap from sending the form again,
    // reports what the session's event stream says happened elsewhere, and writes times in the phone's own zone.
    static let script = """
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

        """

    static let icon = """
        <svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><circle cx="8" cy="8" r="8" fill="#0a4f96"/>\
        <path d="M4.5 8.5l2.2 2.2 4.8-5" fill="none" stroke="#fff" stroke-width="1.8"/></svg>

        """
}
