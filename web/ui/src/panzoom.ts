// Pan and zoom over a drawn SVG (d3-zoom: the wheel or a pinch zooms about the pointer, a drag
// pans, a double click zooms in). The drawing moves inside a viewport group, so the drawing's
// own transforms (Graphviz's) stay as drawn, and a click that was not a drag still reaches it.
import { select } from "d3-selection";
import { zoom, zoomIdentity } from "d3-zoom";

export interface PanZoom {
  zoomBy(factor: number): void;
  reset(): void;
}

const kMaxHeightPx = 520; // the whole drawing fits this on first sight; zoom in from there

export function panZoom(svg: SVGSVGElement): PanZoom {
  const viewport = document.createElementNS("http://www.w3.org/2000/svg", "g");
  viewport.setAttribute("class", "viewport");
  viewport.append(...svg.childNodes);
  svg.append(viewport);
  // Graphviz gives its size in points; the box keeps that height up to the cap, and the
  // viewBox scales the drawing into it.
  const natural = parseFloat(svg.getAttribute("height") ?? "") * (4 / 3);
  svg.setAttribute("width", "100%");
  svg.setAttribute("height", `${Math.min(kMaxHeightPx, natural || kMaxHeightPx)}px`);
  const behaviour = zoom()
    .scaleExtent([0.2, 20])
    .on("zoom", (event) => viewport.setAttribute("transform", event.transform.toString()));
  const target = select(svg);
  target.call(behaviour);
  return {
    zoomBy: (factor) => behaviour.scaleBy(target, factor),
    reset: () => behaviour.transform(target, zoomIdentity),
  };
}
