// notevault console: the few things a page does besides htmx. No inline script anywhere
// (the Content-Security-Policy allows scripts from this server only).
document.addEventListener("click", async (event) => {
  const button = event.target.closest("button[data-copy]");
  if (!button) return;
  const source = document.getElementById(button.dataset.copy);
  if (!source) return;
  const text = source.textContent;
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = "Copied";
  } catch {
    // Clipboard refused (a page over plain HTTP on another name than localhost): select
    // the text so that the person copies it by hand.
    const range = document.createRange();
    range.selectNodeContents(source);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    button.textContent = "Selected: press Ctrl+C";
  }
});
// An action that failed says so on the page. A session that ended (signed out in another
// tab, expired) answers 401, and a form of an older session (signed in again in another
// tab) 403: the page is loaded again, which shows the sign-in or a fresh form.
document.addEventListener("htmx:responseError", (event) => {
  const status = event.detail.xhr.status;
  if (status === 401 || status === 403) {
    window.location.reload();
    return;
  }
  const flash = document.getElementById("flash");
  if (!flash) return;
  flash.textContent = `Nothing changed: the daemon answered ${status}. Reload the page and try again.`;
  flash.hidden = false;
});
document.addEventListener("htmx:sendError", () => {
  const flash = document.getElementById("flash");
  if (!flash) return;
  flash.textContent = "The daemon cannot be reached: is it still running?";
  flash.hidden = false;
});
// Times as the reader's clock shows them: the page carries UTC (`datetime`, kept in the
// tooltip), the browser knows the local zone. Again for what htmx swaps in.
function localTimes(root) {
  for (const time of root.querySelectorAll("time[datetime]")) {
    const when = new Date(time.dateTime);
    if (Number.isNaN(when.getTime()) || time.dataset.local) continue;
    time.title = time.dateTime;
    time.textContent = when.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
    time.dataset.local = "1";
  }
}
document.addEventListener("DOMContentLoaded", () => localTimes(document));
document.addEventListener("htmx:load", (event) => localTimes(event.detail.elt));
