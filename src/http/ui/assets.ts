/**
 * The console's stylesheet and script, served from the executable at
 * `/ui/assets/console.css` and `/ui/assets/console.js` (nothing is loaded
 * from elsewhere).
 *
 * @module
 */

/** The console's stylesheet: system fonts, light and dark, laptop to phone width. */
export const CONSOLE_CSS = `
:root{color-scheme:light dark;--bg:#fff;--fg:#1b1f24;--muted:#57606a;--line:#d0d7de;--card:#f6f8fa;
--accent:#0a58ca;--ok:#116329;--bad:#b42318;--warn:#8a5a00}
@media (prefers-color-scheme:dark){:root{--bg:#0d1117;--fg:#e6edf3;--muted:#9da7b3;--line:#30363d;
--card:#161b22;--accent:#6ea8fe;--ok:#56d364;--bad:#ff7b72;--warn:#e3b341}}
*{box-sizing:border-box}
body{margin:0;font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;background:var(--bg);color:var(--fg)}
a{color:var(--accent)}
:focus-visible{outline:3px solid var(--accent);outline-offset:2px}
.skip{position:absolute;left:-999px;top:0;background:var(--bg);padding:.5rem}
.skip:focus{left:.5rem}
header{display:flex;flex-wrap:wrap;align-items:center;gap:.5rem 1rem;padding:.6rem 1rem;border-bottom:1px solid var(--line);background:var(--card)}
header .brand{font-weight:700;text-decoration:none;color:var(--fg)}
nav ul{display:flex;flex-wrap:wrap;gap:.25rem .9rem;list-style:none;margin:0;padding:0}
nav a[aria-current=page]{font-weight:700;text-decoration:none}
header form{margin-left:auto}
main{padding:1rem;max-width:1200px;margin:0 auto}
h1{font-size:1.4rem;margin:.2rem 0 1rem}h2{font-size:1.15rem;margin:1.4rem 0 .6rem}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(14rem,1fr));gap:.8rem}
.card{background:var(--card);border:1px solid var(--line);border-radius:6px;padding:.8rem}
.card .big{font-size:1.6rem;font-weight:700}
.table{overflow-x:auto}
table{border-collapse:collapse;width:100%;font-size:.92rem}
th,td{text-align:left;padding:.35rem .5rem;border-bottom:1px solid var(--line);vertical-align:top}
th{font-weight:600;color:var(--muted)}
code,pre{font:13px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
pre{background:var(--card);border:1px solid var(--line);border-radius:6px;padding:.6rem;overflow:auto;max-height:24rem;white-space:pre-wrap;word-break:break-word}
.ok{color:var(--ok)}.bad{color:var(--bad)}.warn{color:var(--warn)}.muted{color:var(--muted)}
.pill{display:inline-block;padding:0 .45rem;border-radius:999px;border:1px solid currentColor;font-size:.8rem}
form.inline{display:inline}
.actions{display:flex;flex-wrap:wrap;gap:.4rem;align-items:center}
button,.button{font:inherit;padding:.3rem .8rem;border-radius:6px;border:1px solid var(--line);background:var(--bg);color:var(--fg);cursor:pointer;text-decoration:none;display:inline-block}
button.primary{background:var(--accent);border-color:var(--accent);color:#fff}
input,select,textarea{font:inherit;padding:.3rem .45rem;border:1px solid var(--line);border-radius:6px;background:var(--bg);color:var(--fg);max-width:100%}
textarea{width:100%;min-height:8rem;font-family:ui-monospace,monospace}
label{display:block;font-weight:600;margin:.4rem 0 .15rem}
fieldset{border:1px solid var(--line);border-radius:6px;margin:0 0 .8rem;padding:.4rem .8rem}
legend{font-weight:600;padding:0 .3rem}
.choice{display:flex;gap:.6rem;align-items:flex-start;margin:.5rem 0}
.choice input{margin-top:.3rem}
.choice label{margin:0}.choice p{margin:.1rem 0 0}
.filters{display:flex;flex-wrap:wrap;gap:.6rem;align-items:end}
.filters label{margin:0}
.notice{border-left:4px solid var(--accent);background:var(--card);padding:.6rem .8rem;margin:.8rem 0}
.notice.bad{border-color:var(--bad)}.notice.ok{border-color:var(--ok)}
.chart{width:100%;height:120px;display:block}
.plot{display:grid;grid-template-columns:auto 1fr;gap:0 .4rem;font-size:.8rem;color:var(--muted)}
.plot .y{display:flex;flex-direction:column;justify-content:space-between;text-align:right;height:120px}
.plot .x{grid-column:2;display:flex;justify-content:space-between}
time{white-space:nowrap}
.diff-add{color:var(--ok);font-weight:600}.diff-del{color:var(--bad);font-weight:600}
.diff-hunk{color:var(--accent)}.diff-file{color:var(--muted)}
.decision input[name=reason]{width:100%}
.chart .ok{fill:var(--ok)}.chart .bad{fill:var(--bad)}.chart .lat{stroke:var(--accent);fill:none;stroke-width:1.5}
#live-feed{list-style:none;padding:0;margin:0;max-height:16rem;overflow:auto;font-size:.9rem}
#live-feed li{padding:.2rem 0;border-bottom:1px solid var(--line)}
.signin{max-width:24rem;margin:4rem auto}
progress{width:100%;height:1.2rem}
.sr-only{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}
@media (max-width:640px){main{padding:.6rem}header form{margin-left:0}th,td{padding:.3rem}
.table table,.table tbody,.table tr,.table td{display:block;width:100%}
.table thead{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0)}
.table tr{border-bottom:1px solid var(--line);padding:.4rem 0}
.table td{border:0;padding:.1rem 0;display:grid;grid-template-columns:6.5rem minmax(0,1fr);gap:.5rem;word-break:break-word}
.table td[data-label]::before{content:attr(data-label);color:var(--muted);font-weight:600}}
`;

/**
 * The console's script: live updates from `/ui/events` (the live feed, and
 * refreshing regions marked `data-live`), and the audit verify's progress.
 */
export const CONSOLE_JS = `
(() => {
  "use strict";
  const feed = document.getElementById("live-feed");
  const status = document.getElementById("live-status");
  const page = document.body.dataset.page;
  // A form's answer shows its page: reloading should not send the form again.
  if (page && location.pathname + location.search !== page) history.replaceState(null, "", page);
  let timers = [];
  function refresh() {
    fetch(page || location.href, { headers: { "X-Console-Partial": "1" }, credentials: "same-origin" })
      .then((r) => r.ok ? r.text() : Promise.reject(r.status))
      .then((html) => {
        const doc = new DOMParser().parseFromString(html, "text/html");
        for (const el of document.querySelectorAll("[data-live][id]")) {
          if (el.contains(document.activeElement)) continue;
          const fresh = doc.getElementById(el.id);
          if (fresh) el.replaceWith(document.importNode(fresh, true));
        }
      }).catch(() => {});
  }
  function schedule() {
    if (!document.querySelector("[data-live]")) return;
    timers.forEach(clearTimeout);
    // Deliveries and circuits follow their events: look again a little later.
    timers = [300, 1500, 4000].map((ms) => setTimeout(refresh, ms));
  }
  // After an action (a replay, a test), its effects land shortly: look again.
  if (document.querySelector("main > .notice")) schedule();
  function describe(type, data) {
    const tool = data.tool_name || data.tool || data.plugin_name || "";
    if (type === "tool.called") return tool + " ok in " + data.latency_ms + " ms";
    if (type === "tool.failed") return tool + " failed: " + (data.error_code || "");
    if (type === "audit.written") return "audit #" + data.seq + " " + tool;
    return tool;
  }
  if (window.EventSource && document.body.dataset.events) {
    const es = new EventSource(document.body.dataset.events);
    es.onopen = () => { if (status) status.textContent = "Live: connected"; };
    es.onerror = () => { if (status) status.textContent = "Live: reconnecting…"; };
    const types = ["tool.called", "tool.failed", "plugin.ready", "plugin.error", "circuit.opened",
      "circuit.closed", "audit.written", "server.started"];
    for (const type of types) {
      es.addEventListener(type, (event) => {
        let envelope;
        try { envelope = JSON.parse(event.data); } catch { return; }
        if (feed) {
          const li = document.createElement("li");
          const time = document.createElement("time");
          time.dateTime = envelope.timestamp;
          time.textContent = envelope.timestamp.slice(11, 19);
          const kind = document.createElement("strong");
          kind.textContent = " " + type + " ";
          li.append(time, kind, document.createTextNode(describe(type, envelope.data || {})));
          feed.prepend(li);
          while (feed.children.length > 50) feed.lastElementChild.remove();
        }
        schedule();
      });
    }
    addEventListener("pagehide", () => es.close());
  }
  const verify = document.getElementById("verify-form");
  if (verify && window.EventSource) {
    verify.addEventListener("submit", (event) => {
      event.preventDefault();
      const bar = document.getElementById("verify-progress");
      const text = document.getElementById("verify-status");
      const button = verify.querySelector("button");
      button.disabled = true;
      bar.hidden = false;
      bar.removeAttribute("value");
      text.textContent = "Verifying…";
      const es = new EventSource(verify.dataset.stream);
      es.addEventListener("progress", (e) => {
        const p = JSON.parse(e.data);
        bar.max = Math.max(1, p.total);
        bar.value = p.checked;
        text.textContent = "Checked " + p.checked + " of " + p.total + " entries";
      });
      es.addEventListener("done", (e) => {
        es.close();
        const r = JSON.parse(e.data);
        bar.max = 1; bar.value = 1;
        text.textContent = r.ok
          ? "Intact: " + r.count + " entries verified up to seq " + r.head_seq
          : "Broken at seq " + r.seq + " (" + r.reason + "): " + r.message;
        text.className = r.ok ? "ok" : "bad";
        button.disabled = false;
      });
      es.onerror = () => {
        es.close();
        text.textContent = "Verification stopped: the connection failed";
        button.disabled = false;
      };
    });
  }
})();
`;
