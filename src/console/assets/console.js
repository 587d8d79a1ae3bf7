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
// A session that ended (signed out in another tab, expired) answers 401: show the sign-in page.
document.addEventListener("htmx:responseError", (event) => {
  if (event.detail.xhr.status === 401) window.location.assign("/");
});
// A decision's answer replaces the card; the pending count in the navigation follows the list.
document.addEventListener("htmx:afterSwap", () => {
  const badge = document.getElementById("pending-badge");
  if (!badge) return;
  const list = document.getElementById("pending");
  if (!list) return;
  const waiting =
    list.querySelectorAll("article.write:not(.decided)").length +
    Number(list.dataset.more || 0);
  badge.textContent = String(waiting);
  badge.hidden = waiting === 0;
});
