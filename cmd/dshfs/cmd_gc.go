package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"
)

func gcCommand() *cli.Command {
	var asJSON bool
	return &cli.Command{
		Name:  "gc",
		Usage: "drop kept bytes past the retention age or the budget (it also runs by itself)",
		Description: "Never drops the current version of a file or a version a checkpoint needs. The budget and age\n" +
			"are `dshfs mount --retain-bytes` and `--retain-age`; the budget counts the index (index.db) too.",
		Flags: []cli.Flag{mountFlag, &cli.BoolFlag{Name: "json", Usage: "print JSON for scripts", Destination: &asJSON}},
		Action: func(c *cli.Context) error {
			return runGC(c, asJSON)
		},
	}
}

// runGC drops kept bytes past the retention age or the budget, and says
// what it dropped and kept.
func runGC(c *cli.Context, asJSON bool) error {
	client, err := clientFor(c, "")
	if err != nil {
		return err
	}
	bar := newProgressBar(os.Stderr, "gc")
	res, err := client.GC(c.Context, bar.update)
	bar.done()
	if err != nil {
		return daemonError(err)
	}
	if asJSON {
		return printJSON(res)
	}
	fmt.Printf("dropped %d object(s), %s; kept %d (%d pinned), with the index %s of a %s budget\n",
		res.Removed, humanBytes(res.FreedBytes), res.Objects, res.Pinned, humanBytes(res.StoredBytes), humanBytes(res.BudgetBytes))
	return nil
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
