// `rackprof annotate`: where inside a function the samples and calls are, per source line and
// (with --disasm) per instruction, in pprof's `list` layout or as JSON.
#include <iostream>
#include <memory>

#include "daemon/app/commands.h"
#include "daemon/app/profile_inputs.h"
#include "daemon/config/config.h"
#include "gmon/annotate.h"

namespace rackprof::daemon::app {

namespace {

struct AnnotateArgs {
    std::string input;
    std::string function;
    bool disasm = false;
    bool json = false;
    std::vector<std::string> source_roots;
    ProfileInputArgs profile;
};

// --source-root, else the configuration's [sources] roots, else the ELF's compilation folders.
gmon::SourceRoots roots_of(const AnnotateArgs& args, const gmon::Symbolizer& elf) {
    std::vector<std::filesystem::path> roots(args.source_roots.begin(), args.source_roots.end());
    if (roots.empty() && args.profile.config)
        roots = config::load_config(*args.profile.config).source_roots;
    return roots.empty() ? gmon::SourceRoots::of_elf(elf) : gmon::SourceRoots(roots);
}

int run_annotate(const AnnotateArgs& args) {
    const auto input = profile_input_of(args.input, args.profile);
    gmon::AnnotateOptions options;
    options.function = args.function;
    options.instructions = args.disasm;
    options.max_functions = 0;  // the whole program: every function with samples or calls
    const auto& elf = *input->source.elf;
    gmon::Annotation annotation;
    try {
        annotation = gmon::annotate(*input->source.aggregate, elf, roots_of(args, elf), options);
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }
    if (args.json) {
        std::cout << gmon::annotation_json(annotation).dump(2) << "\n";
    } else {
        std::cout << gmon::annotation_text(annotation);
    }
    return 0;
}

}  // namespace

CommandRun add_annotate_command(CLI::App& root) {
    CLI::App& app = add_command(
        root, "annotate", "samples and calls per source line and instruction of a function",
        "Prints, as pprof's list does, each source line of a function with its PC samples, their\n"
        "share of all samples and its 95 % Wilson interval, and the calls made from it; with\n"
        "--disasm each line's instructions (capstone) under it. Source text is read only from\n"
        "the source roots: --source-root, else the configuration's [sources] roots, else the\n"
        "ELF's compilation directories.");
    auto args = std::make_shared<AnnotateArgs>();
    app.add_option("CAPTURE", args->input, "a capture file, a gmon.out, or with --db a selection")
        ->required();
    app.add_option("--function", args->function,
                   "the function (gprof's name); default: every function with samples or\n"
                   "calls, busiest first (the whole program)")
        ->type_name("NAME");
    app.add_flag("--disasm", args->disasm, "each line's instructions under it");
    app.add_flag("--json", args->json, "the annotation as JSON (the API's /lines and /disasm)");
    app.add_option("--source-root", args->source_roots,
                   "a folder source files may be read from (repeatable)")
        ->type_name("DIR")
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    add_profile_input_options(app, args->profile);
    return [args] { return run_annotate(*args); };
}

}  // namespace rackprof::daemon::app
