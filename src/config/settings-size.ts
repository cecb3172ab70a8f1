/**
 * The largest settings file llmgw reads, or writes through the API: far past what a cluster's
 * settings hold, and small enough that reading it costs the control plane little (parsing
 * a 1 MB YAML document costs it about 170 MB).
 */
export const settingsMaxBytes = 256 * 1024;

/** The one message of a settings file over the bound. */
export const settingsSizeMessage = `a settings file holds at most ${settingsMaxBytes / 1024} KiB: no cluster's settings need more; declare models through the API (llmgw ctl model add) rather than in the file`;
