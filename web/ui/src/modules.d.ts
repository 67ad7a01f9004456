// The little of d3-flame-graph and d3-selection the dashboard calls: neither ships types.
declare module "d3-flame-graph" {
  export interface FrameNode {
    data: {
      name: string;
      value: number;
      delta?: number;
      significant?: boolean;
      children?: unknown[];
    };
    value: number;
    delta?: number;
    x0: number;
    x1: number;
    depth: number;
    highlight?: boolean;
  }
  export interface FlameGraph {
    (selection: unknown): void;
    width(px: number): FlameGraph;
    cellHeight(px: number): FlameGraph;
    minFrameSize(px: number): FlameGraph;
    transitionDuration(ms: number): FlameGraph;
    inverted(on: boolean): FlameGraph;
    sort(on: boolean): FlameGraph;
    selfValue(on: boolean): FlameGraph;
    setLabelHandler(label: (d: FrameNode) => string): FlameGraph;
    setColorMapper(color: (d: FrameNode, original: string) => string): FlameGraph;
    setDetailsElement(el: HTMLElement): FlameGraph;
    onClick(handler: (d: FrameNode) => void): FlameGraph;
    search(term: string): void;
    clear(): void;
    resetZoom(): void;
    destroy(): void;
  }
  export default function flamegraph(): FlameGraph;
}

declare module "d3-selection" {
  interface Selection {
    datum(data: unknown): Selection;
    call(f: (s: Selection) => void): Selection;
  }
  export function select(el: Element): Selection;
}

declare module "d3-zoom" {
  import type { Selection } from "d3-selection";
  export interface ZoomTransform {
    readonly k: number;
    readonly x: number;
    readonly y: number;
    toString(): string;
  }
  export interface ZoomBehavior {
    (selection: Selection): void;
    scaleExtent(extent: [number, number]): ZoomBehavior;
    on(type: "zoom", listener: (event: { transform: ZoomTransform }) => void): ZoomBehavior;
    scaleBy(selection: Selection, factor: number): void;
    transform(selection: Selection, transform: ZoomTransform): void;
  }
  export function zoom(): ZoomBehavior;
  export const zoomIdentity: ZoomTransform;
}

// flame-chart-js's plugins are EventEmitters of the `events` package, which ships no types (its
// declarations reference Node's): the little of it the timeline calls.
declare module "events" {
  export class EventEmitter {
    static defaultMaxListeners: number;
    on(event: string, listener: (...args: never[]) => void): this;
    emit(event: string, ...args: unknown[]): boolean;
  }
}
