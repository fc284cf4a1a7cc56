/* The program's version for the log header ('#program-version V' in ascii,
 * a Header.extra field "program-version" in binary): --program-version STR,
 * else the GNU build-id of CMD's executable (found as execvp finds it),
 * read with libelf, as "build-id:HEX". A program that is not ELF (a
 * script) or has no build-id gets none. */
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmon/log.h"
#include "snarflog.h"

/* Is `v` fit for one header line: printable ASCII, no spaces at its ends,
 * 1 to SNARF_VERSION_MAX bytes? */
bool snarf_version_valid(const char *v)
{
	size_t n = strlen(v);

	if (n == 0 || n > SNARF_VERSION_MAX || v[0] == ' ' || v[n - 1] == ' ')
		return false;
	for (; *v; v++)
		if ((unsigned char)*v < 0x20 || (unsigned char)*v > 0x7e)
			return false;
	return true;
}

/* The file execvp would run for `cmd` into path; false if none. */
static bool find_exec(const char *cmd, char *path, size_t size)
{
	const char *dirs = getenv("PATH");

	if (strchr(cmd, '/')) {
		snprintf(path, size, "%s", cmd);
		return access(path, X_OK) == 0;
	}
	if (!dirs || !*dirs)
		dirs = "/bin:/usr/bin";
	for (const char *d = dirs, *e; ; d = e + 1) {
		e = strchr(d, ':');
		size_t n = e ? (size_t)(e - d) : strlen(d);
		if ((size_t)snprintf(path, size, "%.*s%s%s", (int)n, d, n ? "/" : "", cmd) < size &&
		    access(path, X_OK) == 0)
			return true;
		if (!e)
			return false;
	}
}

/* The GNU build-id note of ELF file `fd` as "build-id:HEX"; false if none. */
static bool elf_build_id(int fd, char *out, size_t size)
{
	Elf *e;
	Elf_Scn *scn = NULL;
	bool found = false;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return false;
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e)
		return false;
	while (!found && (scn = elf_nextscn(e, scn)) != NULL) {
		GElf_Shdr sh;
		Elf_Data *data;
		GElf_Nhdr nh;
		size_t off = 0, name_off, desc_off;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE || !(data = elf_getdata(scn, NULL)))
			continue;
		while (!found && (off = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
			if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 ||
			    memcmp((const char *)data->d_buf + name_off, "GNU", 4) ||
			    nh.n_descsz == 0 || 9 + 2 * nh.n_descsz >= size)
				continue;
			const unsigned char *d = (const unsigned char *)data->d_buf + desc_off;
			size_t n = (size_t)snprintf(out, size, "build-id:");
			for (size_t i = 0; i < nh.n_descsz; i++)
				n += (size_t)snprintf(out + n, size - n, "%02x", d[i]);
			found = true;
		}
	}
	elf_end(e);
	return found;
}

void snarf_version(struct snarf *s)
{
	char path[PATH_MAX];
	int fd;

	s->version[0] = '\0';
	if (s->opt.program_version) {
		snprintf(s->version, sizeof s->version, "%s", s->opt.program_version);
		return;
	}
	if (!s->opt.cmd || !find_exec(s->opt.cmd[0], path, sizeof path))
		return;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	if (elf_build_id(fd, s->version, sizeof s->version))
		cmon_debug("program version %s (from %s)", s->version, path);
	else
		s->version[0] = '\0';
	close(fd);
}
