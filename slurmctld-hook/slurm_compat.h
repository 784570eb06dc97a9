/*
 * slurm_compat.h - the one place where the slurmctld plugins meet what
 * differs between the Slurm releases Lachesis supports.
 *
 * The plugins are compiled against the configured source of the release
 * that loads them (scripts/slurm-src.sh). Slurm's own version macro,
 * SLURM_VERSION_NUMBER (slurm/slurm_version.h, written by configure),
 * picks one file per release, and only that file knows the release:
 *
 *   slurm_compat_22_05.h  Debian 12's Slurm 22.05
 *   slurm_compat_24_11.h  Debian 13's Slurm 24.11
 *
 * Each defines the same things, so the plugins carry no release #if:
 *
 *   - the interface headers, which moved from src/common and src/slurmctld
 *     to src/interfaces in 23.02 (gres, select, priority, preempt);
 *   - list_t, list_itr_t and job_details_t, 24.11's names of List,
 *     ListIterator and struct job_details;
 *   - LACHESIS_GRES_PREFIX, how the release writes a gres in a job's TRES
 *     strings ("gres:gpu:2" up to 22.05, "gres/gpu:2" from 23.02), for the
 *     strings the plugins write;
 *   - lachesis_job_drop_priority_array(), the per-partition priorities a
 *     job may carry from another priority plugin (job_ptr->priority_array
 *     in 22.05, job_ptr->part_prio->priority_array in 24.11);
 *   - the plugin entry points whose signatures changed, as macros that
 *     define them around a release-neutral function of the plugin:
 *     LACHESIS_JOB_MODIFY (job_modify gained err_msg in 23.02),
 *     LACHESIS_PRIORITY_FACTORS (sprio: 22.05 hands a filter and takes no
 *     locks; 24.11 holds the locks, filters in sprio and nests the factors
 *     in priority_factors_t), LACHESIS_PRIORITY_EXTRA (24.11's
 *     priority_p_recover and priority_p_thread_start);
 *   - lachesis_factors_of(), where a priority_factors_object_t keeps its
 *     factors;
 *   - lachesis_job_gres_updated(), what else must be dropped when a
 *     pending job's GRES request was updated (24.11's cons_tres cache);
 *   - lachesis_replaces_a_slurmctld(), whether `scontrol reconfigure`
 *     started this slurmctld to replace a running one (24.11) rather than
 *     re-reading the configuration in place (22.05).
 *
 * A release not listed stops the build here: docs/slurm-releases.md says
 * what the plugins rely on in the releases after 24.11, so a port is a known
 * list. Slurm itself refuses to load a plugin built for another release
 * (plugin_version is SLURM_VERSION_NUMBER; src/common/plugin.c compares
 * major, minor and micro) and logs "Incompatible Slurm plugin PATH version
 * (X.Y.Z)"; the plugins say at load which release they were built for.
 */
#ifndef LACHESIS_SLURM_COMPAT_H
#define LACHESIS_SLURM_COMPAT_H

#include "slurm/slurm.h"
#include "slurm/slurm_errno.h"

/* Whether this is Slurm release major.minor, whatever its micro version. */
#define LACHESIS_SLURM_IS(major, minor)                 \
	((SLURM_VERSION_NUMBER & 0xffff00) ==           \
	 (SLURM_VERSION_NUM(major, minor, 0) & 0xffff00))

#if LACHESIS_SLURM_IS(22, 5)
#include "slurm_compat_22_05.h"
#elif LACHESIS_SLURM_IS(24, 11)
#include "slurm_compat_24_11.h"
#else
#error "Lachesis's plugins support Slurm 22.05 and 24.11; see docs/slurm-releases.md for what a port to this release needs"
#endif

/* The release the plugin was built for, for its log line at load. */
#define LACHESIS_SLURM_BUILT_FOR SLURM_VERSION_STRING

#endif
