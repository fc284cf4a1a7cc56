/* telemonctl — the control interface of a running telemonitor: parse the
 * command line (args.c), send it to the service and print the answer
 * (request.c). All the work is done by the service, except silences
 * when the service has an Alertmanager: those are kept there (am.c). */
#include <stdlib.h>

#include "telemonctl.h"

int main(int argc, char **argv)
{
	struct ctl_cmd c = { 0 };
	bool done = false;
	int rc;

	args_parse(argc, argv, &c);
	rc = am_silence(&c, &done);                /* with an Alertmanager: silences there */
	if (!done)
		rc = request_run(&c);
	for (int i = 0; i < c.nwords; i++)
		free(c.words[i]);
	return rc;
}
