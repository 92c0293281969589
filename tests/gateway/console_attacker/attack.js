// A page on another origin tries to read the console's data and to restart a connection.
const gateway = new URLSearchParams(location.search).get("gateway");
const show = (id, text) => { document.getElementById(id).textContent = text; };
fetch(gateway + "/v1/connections")
  .then((r) => r.text().then((t) => show("read", "read " + r.status + " " + t.slice(0, 40))))
  .catch(() => show("read", "blocked"));
fetch(gateway + "/v1/connections/everything/restart", {
  method: "POST",
  headers: { "Content-Type": "text/plain" },
  body: "{}",
  mode: "no-cors",
})
  .then(() => show("act", "sent"))
  .catch(() => show("act", "blocked"));
