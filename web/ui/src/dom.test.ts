import { describe, expect, it } from "vitest";
import { formText } from "./dom";

describe("formText", () => {
  const data = new FormData();
  data.append("name", " m4-2 ");
  data.append("empty", "");
  data.append("elf", new Blob(["\x7fELF"]), "firmware.elf");

  it("gives a text field's value as typed", () => {
    expect(formText(data, "name")).toBe(" m4-2 ");
    expect(formText(data, "empty")).toBe("");
  });
  it("gives nothing for a file or a field the form does not have", () => {
    expect(data.get("elf")).not.toBeNull();
    expect(formText(data, "elf")).toBe("");
    expect(formText(data, "missing")).toBe("");
  });
});
