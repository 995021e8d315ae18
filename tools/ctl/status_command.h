// paramctl status --job J.yaml [--servers ...] [--backups ...] [--json]
// [--watch]: every replica's status, the serving ones as a table (or all
// as JSON), and with coordination.etcd the job's members as etcd lists
// them; once, or refreshed every second.
#ifndef PARAMD_TOOLS_CTL_STATUS_COMMAND_H_
#define PARAMD_TOOLS_CTL_STATUS_COMMAND_H_

#include "common/base/flags.h"

namespace paramd {

// Prints the status; the exit status: 0, 1 when a serving replica did not
// answer or etcd could not be read, 2 for a command line without --job.
int StatusCommand(const ParsedFlags& flags);

}  // namespace paramd

#endif  // PARAMD_TOOLS_CTL_STATUS_COMMAND_H_
