import { afterEach, describe, expect, it, vi } from "vitest";
import { navigate } from "./router";

// Node has no history nor window: the little of them navigate() uses.
class PopStateEvent extends Event {}

describe("navigate", () => {
  afterEach(() => {
    vi.unstubAllGlobals();
  });

  it("pushes the URL, then tells the page to render (one popstate)", () => {
    const order: string[] = [];
    const pushState = vi.fn((_state: unknown, _title: string, url: string) => {
      order.push(`push ${url}`);
    });
    const target = new EventTarget();
    target.addEventListener("popstate", (e) => order.push(`${e.type} ${e.constructor.name}`));
    vi.stubGlobal("history", { pushState });
    vi.stubGlobal("window", target);
    vi.stubGlobal("PopStateEvent", PopStateEvent);

    navigate("/sessions?board=b1");

    expect(pushState).toHaveBeenCalledExactlyOnceWith(null, "", "/sessions?board=b1");
    expect(order).toEqual(["push /sessions?board=b1", "popstate PopStateEvent"]);
  });
});
