// SPDX-License-Identifier: GPL-3.0-or-later
//
// Fit to Target as a Flamenco 3 job type: copy this file into the `scripts` folder next to
// the flamenco-manager executable (the job type is then "fit-to-target"). See docs/farm.md.
//
// One task per object: each "fit-…" task runs the fit-task command of the headless command's
// farm contract, writing only its own report and JSON-lines log into the results folder. The
// "apply-and-bake" task depends on every fit task and is the only one that writes the shot's
// output (--apply RESULTS --bake BAKE --save OUTPUT), so the .blend has a single writer.
//
// The command is "blender-render": it is the Worker's command for running Blender (every
// Flamenco 3 Worker has it), it expands the Manager's {blender} and {blenderArgs} variables
// (per platform) and finds Blender on the PATH, and it passes its argument lists to Blender
// as they are, one argument each, with no shell: `{exe} {exeArgs} {argsBefore} {blendfile}
// {args}` becomes `blender -b -y --command fit_to_target SHOT.blend ARGS`. Its name says
// "render", but nothing in it renders: it runs Blender with the arguments it is given.
// The tasks' type is "blender" for the same reason: a Worker takes them only when its
// task_types list "blender", as it must to run Blender at all.

const JOB_TYPE = {
    label: "Fit to Target",
    description: "Fit cloth material settings to target shapes: one task per object, then apply and bake",
    settings: [
        // Settings for artists to determine:
        {
            key: "objects", type: "string", required: true,
            // Every mesh object of the scene with fit targets (what the command fits without
            // --object), sorted by name as the command sorts them.
            eval: "', '.join(sorted(o.name for o in C.scene.objects if o.type == 'MESH' and len(o.fit_to_target.targets) > 0))",
            evalInfo: {
                showLinkButton: true,
                description: "Every object with fit targets",
            },
            description: "The objects to fit, by name, separated by commas: one fit task each",
        },
        { key: "device", type: "string", default: "AUTO",
          description: "AUTO (the first CUDA device, else the CPU), cpu, cuda or cuda:N" },
        { key: "tolerance", type: "string", default: "",
          description: "RMSE in millimetres that counts as matching; empty for each object's own setting" },
        { key: "preset", type: "string", default: "",
          description: "Start values from a material preset (a name, or a preset file's path); empty for none" },
        { key: "threads", type: "int32", default: 0, propargs: { min: 0 }, visible: "submission",
          description: "At most this many CPU threads per fit task; 0 for no limit" },
        { key: "misfit_exit", type: "int32", default: 0, propargs: { min: 0, max: 255 }, visible: "submission",
          description: "Exit status of a fit that ran but does not match its targets: 0 keeps an honest misfit a finished task (its report says so), 4 fails it" },

        // Where the results go:
        { key: "results_dir", type: "string", subtype: "dir_path", required: true, visible: "submission",
          eval: "str(Path(abspath('//'), 'fit_to_target', jobname, 'results'))",
          description: "The folder for the fit tasks' reports and logs (made if missing), one .json and one .jsonl per object; give each job its own" },
        { key: "bake_dir", type: "string", subtype: "dir_path", required: true, visible: "submission",
          eval: "str(Path(abspath('//'), 'fit_to_target', jobname, 'cache'))",
          description: "Folder for the baked point caches (made when missing)" },
        { key: "output_file", type: "string", subtype: "file_path", required: true, visible: "submission",
          eval: "str(Path(abspath('//'), 'fit_to_target', jobname, Path(bpy.data.filepath).stem + '_fitted.blend'))",
          description: "The fitted shot; its report and log go next to it (the same name ending in .json and .jsonl)" },

        // Automatically evaluated settings:
        { key: "blendfile", type: "string", required: true, visible: "web",
          description: "The shot .blend; the fit tasks only read it" },
    ]
};

function compileJob(job) {
    print("Fit to Target job submitted");
    const settings = job.settings;
    const objects = objectNames(settings.objects);
    const outputs = outputFiles(settings);

    const fitTasks = [];
    for (const name of objects) {
        const task = author.Task(`fit-${name}`, "blender");
        task.addCommand(blenderCommand(settings.blendfile, fitArgs(settings, name)));
        job.addTask(task);
        fitTasks.push(task);
    }

    const applyTask = author.Task("apply-and-bake", "blender");
    applyTask.addCommand(blenderCommand(settings.blendfile, [
        "--apply", settings.results_dir,
        "--bake", settings.bake_dir,
        "--save", settings.output_file,
        "--report", outputs.report,
        "--log", outputs.log,
        "--keep-going",
        "--misfit-exit", String(settings.misfit_exit),
    ]));
    for (const task of fitTasks) {
        applyTask.addDependency(task);
    }
    job.addTask(applyTask);
}

// The comma-separated names of the "objects" setting, each trimmed, in order, once each.
// (A name that itself holds a comma cannot be listed here: its fit task fails with exit 2.)
function objectNames(text) {
    const names = [];
    for (const part of String(text || "").split(",")) {
        const name = part.trim();
        if (name && names.indexOf(name) < 0) {
            names.push(name);
        }
    }
    if (names.length == 0) {
        throw "no objects to fit: list them in the 'objects' setting, separated by commas";
    }
    return names;
}

// The apply task's report and log: next to the output file, its name ending in .json and
// .jsonl, never in the results folder (whose every .json the apply task reads as a result).
function outputFiles(settings) {
    const folder = path.dirname(settings.output_file);
    const stem = path.stem(settings.output_file);
    if (stripSlashes(folder) == stripSlashes(settings.results_dir)) {
        throw "the output file must not be in the results folder: the apply task reads every .json there";
    }
    return {
        report: path.join(folder, `${stem}.json`),
        log: path.join(folder, `${stem}.jsonl`),
    };
}

function stripSlashes(text) {
    return String(text).replace(/[\\/]+$/, "");
}

// One fit task's arguments after the .blend: the fit-task command line of the farm contract.
function fitArgs(settings, name) {
    const safe = safeFileName(name);
    const args = [
        "--object", name,
        "--report", path.join(settings.results_dir, `${safe}.json`),
        "--log", path.join(settings.results_dir, `${safe}.jsonl`),
        "--misfit-exit", String(settings.misfit_exit),
        "--quiet",
        "--device", settings.device || "AUTO",
    ];
    if (settings.threads > 0) {
        args.push("--threads", String(settings.threads));
    }
    if (settings.tolerance) {
        args.push("--tolerance", String(settings.tolerance));
    }
    if (settings.preset) {
        args.push("--preset", settings.preset);
    }
    return args;
}

// The file name (without extension) of an object's results, as the OpenJD template makes it:
// every character other than an ASCII letter, a digit, "-", "_", a "." that is not the first
// character, or a non-ASCII character becomes "%" and its two hex digits.
function safeFileName(name) {
    let out = "";
    let index = 0;
    for (const ch of name) { // by code point
        const code = ch.codePointAt(0);
        const keep = code > 127 || /[A-Za-z0-9_-]/.test(ch) || (ch == "." && index > 0);
        out += keep ? ch : "%" + code.toString(16).toUpperCase().padStart(2, "0");
        index++;
    }
    return out;
}

function blenderCommand(blendfile, args) {
    return author.Command("blender-render", {
        exe: "{blender}",
        exeArgs: "{blenderArgs}",
        argsBefore: ["--command", "fit_to_target"],
        blendfile: blendfile,
        args: args,
    });
}
