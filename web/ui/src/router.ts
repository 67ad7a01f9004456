// Moving between pages without a reload: main.ts renders on every popstate.
export function navigate(href: string) {
  history.pushState(null, "", href);
  window.dispatchEvent(new PopStateEvent("popstate"));
}
