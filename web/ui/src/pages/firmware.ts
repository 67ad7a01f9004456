// Firmware and import: upload an ELF (stored once by build-id), import a capture or a
// gmon.out as a completed session, optionally named by an uploaded ELF.
import { api } from "../api";
import { count, time } from "../format";
import { attempt, form, formText, h, link, replace, section, selectField } from "../dom";

export async function firmwarePage(main: HTMLElement) {
  const elfResult = h("div", { role: "status", id: "elf-result" });
  const importResult = h("div", { role: "status", id: "import-result" });
  const firmwareId = h("input", {
    name: "firmware",
    id: "firmware-id",
    size: 44,
    pattern: "[0-9a-f]*",
    placeholder: "optional: an uploaded firmware id",
  }) as HTMLInputElement;

  // The images already uploaded, newest first: each can name an import below, and leads to
  // its build's sessions.
  const uploaded = h("div", { id: "firmware-list" }, h("p", { class: "muted" }, "Loading…"));
  const renderUploaded = async () => {
    const images = await api.firmware();
    if (!images.length)
      return replace(uploaded, h("p", { class: "muted" }, "No firmware uploaded yet."));
    replace(
      uploaded,
      h(
        "table",
        { class: "data" },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ...["Firmware id", "Bytes", "Stored", ""].map((t) => h("th", { scope: "col" }, t)),
          ),
        ),
        h(
          "tbody",
          {},
          images.map((f) =>
            h(
              "tr",
              { "data-firmware": f.id },
              h("td", { class: "mono" }, h("code", {}, f.id)),
              h("td", { class: "num" }, count(f.bytes)),
              h("td", {}, time(f.stored_ns)),
              h(
                "td",
                {},
                h(
                  "button",
                  { type: "button", class: "use", onclick: () => (firmwareId.value = f.id) },
                  "use for an import",
                ),
                " · ",
                link(`/fleet?build_id=${f.id}`, "its build's sessions"),
              ),
            ),
          ),
        ),
      ),
    );
  };

  const uploadElf = async (data: FormData) => {
    const file = (data.get("elf") as File | null) ?? null;
    if (!file || !file.size)
      return replace(elfResult, h("p", { class: "error" }, "Choose an ELF file first."));
    await attempt(elfResult, "Uploading…", async () => {
      const r = await api.uploadFirmware(file);
      firmwareId.value = r.id;
      replace(
        elfResult,
        h(
          "p",
          {},
          `${r.stored ? "Stored" : "Already stored"}: firmware `,
          h("code", {}, r.id),
          ` (${r.functions} functions). Its id is filled in below.`,
        ),
      );
      await renderUploaded();
    });
  };
  const elfForm = form(
    { id: "elf-form" },
    uploadElf,
    h("label", {}, "ELF file ", h("input", { type: "file", name: "elf", id: "elf-file" })),
    h("button", { type: "submit" }, "Upload"),
  );

  const importCapture = async (data: FormData) => {
    const file = data.get("capture") as File | null;
    if (!file || !file.size)
      return replace(
        importResult,
        h("p", { class: "error" }, "Choose a capture or gmon.out first."),
      );
    const format = formText(data, "format");
    const query: Record<string, string> = { format, addr_bytes: formText(data, "addr_bytes") };
    // A capture's protocol; a gmon.out or a Tiva report has none.
    if (format === "bin" || format === "hex") query.protocol = formText(data, "protocol");
    // A Tiva file's reports: a session each (each a minute of its own), or their sum.
    if (format === "tiva") query.reports = formText(data, "reports");
    const board = formText(data, "board");
    if (board) query.board = board;
    const firmware = formText(data, "firmware");
    if (firmware) query.firmware = firmware;
    await attempt(importResult, "Importing…", async () => {
      const s = await api.importSession(file, query);
      const ids = s.imported ?? [s.id];
      replace(
        importResult,
        ids.length > 1
          ? h(
              "p",
              { id: "imported-several" },
              `Imported as ${ids.length} sessions, one per report in the file: `,
              ...ids.flatMap((id, i) => [i ? ", " : "", link(`/sessions/${id}`, `session ${id}`)]),
              ` (or import again with "their sum" for one session of all of them).`,
            )
          : h(
              "p",
              {},
              `Imported as session ${s.id} (${s.counters.arcs ?? 0} arcs, ${s.counters.pc_samples ?? 0} samples, ${s.counters.bytes_discarded ?? 0} bytes discarded): `,
              link(`/sessions/${s.id}`, "open its profile"),
            ),
      );
    });
  };
  const importForm = form(
    { id: "import-form" },
    importCapture,
    h("label", {}, "File ", h("input", { type: "file", name: "capture", id: "capture-file" })),
    selectField("Format ", "format", [
      ["bin", "binary capture"],
      ["hex", "hex-ASCII capture"],
      ["gmon", "gmon.out"],
      ["tiva", "Tiva binned PC report"],
    ]),
    selectField("Protocol ", "protocol", [
      ["legacy", "legacy (the thesis' records)"],
      ["framed", "framed (rackprof's runtime)"],
      ["itm", "ITM over SWO"],
    ]),
    selectField("Address bytes ", "addr_bytes", ["3", "4"]),
    selectField("Tiva reports ", "reports", [
      ["each", "a session each"],
      ["sum", "their sum"],
    ]),
    h("label", {}, "Board name ", h("input", { name: "board", placeholder: "import" })),
    h("label", {}, "Firmware ", firmwareId),
    h("button", { type: "submit" }, "Import"),
  );

  replace(
    main,
    h("h1", {}, "Firmware & import"),
    section(
      "h-elf",
      "Upload firmware (ELF)",
      h(
        "p",
        { class: "muted" },
        "Stored once under its build-id. Name it when you import a capture below or add a board on the Rack page; a session captured without it gets it on its profile page.",
      ),
      elfForm,
      elfResult,
    ),
    section("h-firmware-list", "Uploaded firmware", uploaded),
    section(
      "h-import",
      "Import a capture or gmon.out",
      h("p", { class: "muted" }, "Stored as a completed session."),
      importForm,
      importResult,
    ),
  );
  await renderUploaded();
}
