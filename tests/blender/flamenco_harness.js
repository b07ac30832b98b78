// A stand-in for Flamenco Manager's job compiler, for the farm tests (Node 20, no packages).
//
//   node flamenco_harness.js info JOB_TYPE.js                the job type's JOB_TYPE, as JSON
//   node flamenco_harness.js compile JOB_TYPE.js SETTINGS    compile a job: SETTINGS is a JSON
//        file of {"name": ..., "settings": {...}} (or of the settings alone); prints
//        {"tasks": [{name, type, commands: [{name, parameters}], dependencies: [names]}],
//         "settings": {...}, "printed": [...]}
//
// It runs the script as Flamenco 3's Manager does (internal/manager/job_compilers): the file
// is loaded into a fresh global scope holding `author`, `path`, `print` and `alert`, then
// `compileJob(job)` is called with a job whose `settings` are the submitted ones (missing
// settings get their default, as the Blender add-on submits them) and whose `addTask` collects
// the tasks. It refuses, with exit status 1 and one line on stderr, what Flamenco refuses:
//   - a required setting missing or empty, or a setting of the wrong type (the submission);
//   - author.Task without a name or a type (author.go);
//   - a command the Worker does not know (cmd_executor.go's registry: the Worker fails the
//     task with "unknown command"), or a blender-render command without `exe` or with
//     `argsBefore`/`args` that are not lists of strings (command_blender.go);
//   - a dependency on a task that was not added to the job (the Manager cannot store it);
//   - anything compileJob throws.
"use strict";

const fs = require("fs");
const vm = require("vm");

// The Worker's commands (Flamenco 3's internal/worker/cmd_executor.go).
const WORKER_COMMANDS = new Set([
    "echo", "sleep", "exec", "blender-render", "frames-to-video",
    "move-directory", "copy-file",
]);
const SETTING_TYPES = {
    string: (v) => typeof v === "string",
    int32: (v) => Number.isInteger(v),
    float: (v) => typeof v === "number",
    bool: (v) => typeof v === "boolean",
};

class Refusal extends Error {}

function refuse(message) {
    throw new Refusal(message);
}

// -- Go's `path` and Flamenco's crosspath, as the Manager's `path` module has them ----------

function toSlash(p) {
    return String(p).replaceAll("\\", "/");
}

function clean(p) { // Go's path.Clean
    if (p === "") return ".";
    const rooted = p.startsWith("/");
    const out = [];
    for (const part of p.split("/")) {
        if (part === "" || part === ".") continue;
        if (part === "..") {
            if (out.length && out[out.length - 1] !== "..") out.pop();
            else if (!rooted) out.push("..");
        } else {
            out.push(part);
        }
    }
    const joined = (rooted ? "/" : "") + out.join("/");
    return joined || (rooted ? "/" : ".");
}

function goBase(p) { // Go's path.Base
    if (p === "") return ".";
    p = p.replace(/\/+$/, "");
    if (p === "") return "/";
    return p.slice(p.lastIndexOf("/") + 1);
}

const PATH = {
    join: (...elements) => {
        const given = elements.map(String).filter((e) => e !== "");
        return given.length ? toSlash(clean(given.join("/"))) : "";
    },
    basename: (p) => goBase(toSlash(p)),
    dirname: (p) => {
        if (p === "") return ".";
        const slashed = toSlash(p);
        const dir = slashed.slice(0, slashed.lastIndexOf("/") + 1);
        if (dir === "") return ".";
        return dir.length > 1 ? dir.slice(0, -1) : dir;
    },
    stem: (p) => {
        const base = goBase(toSlash(p));
        const dot = base.lastIndexOf(".");
        return dot < 0 ? base : base.slice(0, dot);
    },
};

// -- author: tasks and commands --------------------------------------------------------------

let nextId = 0;

class AuthoredTask {
    constructor(name, type) {
        this.uuid = `task-${++nextId}`;
        this.name = name;
        this.type = type;
        this.priority = 50;
        this.commands = [];
        this.dependencies = [];
    }

    addCommand(command) {
        if (!(command instanceof AuthoredCommand)) refuse(`task '${this.name}': addCommand takes an author.Command`);
        this.commands.push(command);
    }

    addDependency(task) {
        if (!(task instanceof AuthoredTask)) refuse(`task '${this.name}': addDependency takes an author.Task`);
        this.dependencies.push(task);
    }
}

class AuthoredCommand {
    constructor(name, parameters, totalStepCount) {
        this.name = name;
        this.parameters = parameters || {};
        this.totalStepCount = totalStepCount || 0;
    }
}

const AUTHOR = {
    Task: (name, type) => {
        name = String(name ?? "").trim();
        type = String(type ?? "").trim();
        if (!name) refuse("author.Task(name, type): name is required");
        if (!type) refuse("author.Task(name, type): type is required");
        return new AuthoredTask(name, type);
    },
    Command: (name, parameters, totalStepCount) => new AuthoredCommand(name, parameters, totalStepCount),
};

// -- the job type ----------------------------------------------------------------------------

function load(file, printed) {
    const context = vm.createContext({
        author: AUTHOR,
        path: PATH,
        print: (...args) => printed.push(args.map(String).join(" ")),
        alert: (...args) => printed.push("alert: " + args.map(String).join(" ")),
    });
    vm.runInContext(fs.readFileSync(file, "utf8"), context, { filename: file });
    // `const JOB_TYPE` lives in the script scope, which later scripts in the context share
    const jobType = vm.runInContext("typeof JOB_TYPE === 'undefined' ? undefined : JOB_TYPE", context);
    if (!jobType || !Array.isArray(jobType.settings)) refuse(`${file} does not define a proper JOB_TYPE object`);
    return { context, jobType };
}

function submittedSettings(jobType, given) {
    const settings = { ...given };
    for (const setting of jobType.settings) {
        const has = Object.prototype.hasOwnProperty.call(settings, setting.key);
        if (!has && "default" in setting) settings[setting.key] = setting.default;
        const value = settings[setting.key];
        if (setting.required && (value === undefined || value === null || value === "")) {
            refuse(`setting '${setting.key}' is required`);
        }
        const check = SETTING_TYPES[setting.type];
        if (!check) refuse(`setting '${setting.key}': unknown type '${setting.type}'`);
        if (value !== undefined && !check(value)) {
            refuse(`setting '${setting.key}' must be of type ${setting.type}, not ${JSON.stringify(value)}`);
        }
        if (setting.choices && value !== undefined && !setting.choices.includes(value)) {
            refuse(`setting '${setting.key}': ${JSON.stringify(value)} is not one of ${setting.choices.join(", ")}`);
        }
    }
    return settings;
}

function checkCommand(task, command) {
    if (!WORKER_COMMANDS.has(command.name)) {
        refuse(`task '${task.name}': unknown command ${JSON.stringify(command.name)} (the Worker runs ${[...WORKER_COMMANDS].join(", ")})`);
    }
    if (command.name === "blender-render") {
        const p = command.parameters;
        if (typeof p.exe !== "string" || p.exe === "") refuse(`task '${task.name}': blender-render: missing 'exe' parameter`);
        for (const key of ["argsBefore", "args"]) {
            if (p[key] !== undefined && !(Array.isArray(p[key]) && p[key].every((a) => typeof a === "string"))) {
                refuse(`task '${task.name}': blender-render: '${key}' must be a list of strings`);
            }
        }
        if (p.blendfile !== undefined && typeof p.blendfile !== "string") {
            refuse(`task '${task.name}': blender-render: 'blendfile' must be a string`);
        }
    }
}

function compile(file, submission) {
    const printed = [];
    const { context, jobType } = load(file, printed);
    if (typeof context.compileJob !== "function") refuse(`${file} does not define a compileJob(job) function`);
    const given = submission.settings && typeof submission.settings === "object" ? submission.settings : submission;
    const tasks = [];
    const job = {
        name: submission.name || "job",
        jobType: submission.type || PATH.stem(file).replaceAll("_", "-"),
        priority: 50,
        created: new Date(0),
        settings: submittedSettings(jobType, given),
        metadata: {},
        addTask: (task) => {
            if (!(task instanceof AuthoredTask)) refuse("job.addTask takes an author.Task");
            tasks.push(task);
        },
    };
    try {
        context.compileJob(job);
    } catch (e) {
        if (e instanceof Refusal) throw e;
        refuse(`compileJob: ${e && e.message !== undefined ? e.message : String(e)}`);
    }
    const added = new Set(tasks);
    for (const task of tasks) {
        for (const command of task.commands) checkCommand(task, command);
        for (const dep of task.dependencies) {
            if (!added.has(dep)) refuse(`task '${task.name}' depends on task '${dep.name}', which was not added to the job`);
        }
    }
    return {
        tasks: tasks.map((t) => ({
            name: t.name,
            type: t.type,
            commands: t.commands.map((c) => ({ name: c.name, parameters: c.parameters })),
            dependencies: t.dependencies.map((d) => d.name),
        })),
        settings: job.settings,
        printed,
    };
}

function main(argv) {
    const [mode, file, settingsFile] = argv;
    if (mode === "info" && file) {
        return load(file, []).jobType;
    }
    if (mode === "compile" && file && settingsFile) {
        return compile(file, JSON.parse(fs.readFileSync(settingsFile, "utf8")));
    }
    refuse("usage: node flamenco_harness.js info JOB_TYPE.js | compile JOB_TYPE.js SETTINGS.json");
}

try {
    process.stdout.write(JSON.stringify(main(process.argv.slice(2)), null, 1) + "\n");
} catch (e) {
    process.stderr.write(`flamenco-harness: ${e instanceof Refusal ? e.message : e && e.stack ? e.stack : e}\n`);
    process.exitCode = 1;
}
